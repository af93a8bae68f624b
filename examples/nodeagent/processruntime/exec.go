package processruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/pty"
)

// This file runs a command in a running container (kubectl exec, cp):
// through the pod's sandbox's init for a sandboxed pod (exec_sandboxed.go),
// as a process of the host's otherwise (exec_host.go). An exec is a
// process of its container but not the container: it is in its cgroup
// and ends with it, and with the pod, but its exit is only the session's.

// Exec runs cmd in container of pod uid as the container runs: in its
// pod's sandbox (its user, PID, IPC, UTS and network namespaces), in the
// container's view (its volumes, its read-only root), with its identity
// (user, groups, capabilities, no_new_privs, seccomp), environment and
// working directory, in its cgroup; with s.TTY, on a terminal opened in
// the pod, whose size follows s.Resize (the command runs once the first
// size has come, or after initialSizeWait without one). s.Stdin's end
// closes the command's stdin; without s.Stdin, its stdin is /dev/null.
//
// It returns the command's exit code once it has exited (128+n for a
// signal n) and its output is copied. The error is nil then; it says why
// the command could not run otherwise: cmd is empty, the pod or container
// is unknown (ErrNotFound) or its process does not run (ErrNotRunning),
// the pod was not synced since the agent started (its spec is needed), or
// the command cannot start (not found in the container's PATH, say). When
// ctx ends first, the command's process group is killed and ctx's error
// returned; when the pod's sandbox ends under it, an error says so.
//
// Called from any goroutine, concurrently for any sessions. The command
// never outlives its container or its pod.
func (r *Runtime) Exec(ctx context.Context, uid types.UID, container string, cmd []string, s Streams) (int, error) {
	if len(cmd) == 0 || cmd[0] == "" {
		return 0, errors.New("processruntime: exec: no command")
	}
	if r.closed() {
		return 0, ErrClosed
	}
	rc, err := r.findRunning(uid, container)
	if err != nil {
		return 0, fmt.Errorf("processruntime: exec: %w", err)
	}
	return r.execIn(ctx, rc, container, cmd, s)
}

// execIn is Exec in the running container rc, named container.
func (r *Runtime) execIn(ctx context.Context, rc runningContainer, container string, cmd []string, s Streams) (int, error) {
	if rc.spec == nil {
		return 0, fmt.Errorf("processruntime: exec: pod %s/%s has not been synced since the agent started; its container's spec is not known yet", rc.p.namespace, rc.p.name)
	}
	var code int
	var err error
	if rc.proc.sb != nil {
		code, err = r.execSandboxed(ctx, rc, cmd, s)
	} else {
		code, err = r.execHost(ctx, rc, cmd, s)
	}
	if err != nil && ctx.Err() == nil {
		return 0, fmt.Errorf("processruntime: exec in container %q of pod %s/%s: %w", container, rc.p.namespace, rc.p.name, err)
	}
	return code, err
}

// execNames numbers the execs of this agent's run; execPrefix tells them
// from those an earlier run started (its PID was another).
var (
	execNames  atomic.Uint64
	execPrefix = "exec/" + strconv.Itoa(os.Getpid()) + "."
)

// execName names a new exec in its sandbox. The '/' no container name
// has keeps it apart from the containers' processes.
func execName() string { return execPrefix + strconv.FormatUint(execNames.Add(1), 10) }

// execPipes are a non-terminal exec's pipes: the process's ends and the
// session's.
type execPipes struct {
	// The process's: stdin nil without input.
	stdin, stdout, stderr *os.File
	// The session's: in nil without input.
	in, out, errOut *os.File
}

// newExecPipes makes the pipes of a session, with stdin when asked.
func newExecPipes(stdin bool) (*execPipes, error) {
	e := &execPipes{}
	var err error
	if e.out, e.stdout, err = os.Pipe(); err != nil {
		return nil, err
	}
	if e.errOut, e.stderr, err = os.Pipe(); err != nil {
		e.closeProcessEnds()
		e.closeSessionEnds()
		return nil, err
	}
	if stdin {
		if e.stdin, e.in, err = os.Pipe(); err != nil {
			e.closeProcessEnds()
			e.closeSessionEnds()
			return nil, err
		}
	}
	return e, nil
}

func (e *execPipes) closeProcessEnds() { closeFiles(e.stdin, e.stdout, e.stderr) }
func (e *execPipes) closeSessionEnds() { closeFiles(e.in, e.out, e.errOut) }

func closeFiles(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// initialSizeWait bounds how long an exec with a terminal waits for the
// client's first terminal size before its command runs, so the command
// starts with the client's size (kubectl sends it at once), not 0x0.
const initialSizeWait = time.Second

// applyInitialSize sets the terminal's size to the client's first one,
// waiting for it up to initialSizeWait (or until ctx ends); the later
// ones are forwarded once the command runs.
func (r *Runtime) applyInitialSize(ctx context.Context, s Streams, terminal *os.File) {
	if s.Resize == nil {
		return
	}
	t := r.clock.NewTimer(initialSizeWait)
	defer t.Stop()
	select {
	case size, ok := <-s.Resize:
		if ok && size.Width > 0 && size.Height > 0 {
			_ = pty.SetSize(terminal, size.Width, size.Height)
		}
	case <-t.C():
	case <-ctx.Done():
	}
}

// execSession is an exec's side of its streams: the session's ends of
// its pipes, or of its terminal, and what copies through them.
type execSession struct {
	// pipes is nil with a terminal, terminal nil without.
	pipes    *execPipes
	terminal *os.File
	out      outputs
	done     chan struct{}
	resizes  sync.WaitGroup
}

// start starts the copies: the client's input to the process (its end
// closes a pipe), the process's output to the client, the client's
// resizes to the terminal.
func (e *execSession) start(s Streams) {
	e.done = make(chan struct{})
	if e.terminal != nil {
		if s.Stdin != nil {
			go copyIn(e.terminal, s.Stdin, false)
		}
		e.out.copy(s.Stdout, e.terminal, true)
		e.resizes.Go(func() { forwardResizes(s.Resize, e.terminal, e.done) })
		return
	}
	if e.pipes.in != nil {
		go copyIn(e.pipes.in, s.Stdin, true)
	}
	e.out.copy(s.Stdout, e.pipes.out, false)
	e.out.copy(s.Stderr, e.pipes.errOut, false)
}

// closeEnds closes the session's ends: what copies from them ends.
func (e *execSession) closeEnds() {
	if e.pipes != nil {
		e.pipes.closeSessionEnds()
	} else {
		e.terminal.Close()
	}
}

// end ends what start started but the input's copy, once the output's
// copies have ended (drained, or by closeEnds).
func (e *execSession) end() {
	e.out.wait()
	e.closeEnds()
	close(e.done)
	e.resizes.Wait()
}

// drainOutput waits for out's copies to end once the command has exited
// (its output pipes or terminal reach their end when nothing holds them),
// up to KillTimeout: a process it left outside its group may hold them,
// and then stop closes what is copied from, ending the copies.
func (r *Runtime) drainOutput(out *outputs, stop func()) {
	drained := make(chan struct{})
	go func() {
		out.wait()
		close(drained)
	}()
	t := r.clock.NewTimer(r.killTimeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C():
		stop()
		<-drained
	}
}
