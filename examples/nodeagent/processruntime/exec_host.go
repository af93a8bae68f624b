package processruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/pty"
)

// execHost runs an exec of a pod that runs without a sandbox: a process
// of the host, with the container's environment and working directory,
// in its cgroup (its pod's limits), its own process group (its own
// session with a terminal), killed with its group when it ends.
func (r *Runtime) execHost(ctx context.Context, rc runningContainer, cmd []string, s Streams) (int, error) {
	env, path, dir := r.containerProcessEnv(rc.pod, rc.spec)
	if dir == "" {
		dir = filepath.Join(rc.p.dir, scratchDir)
	}
	exe, err := lookPath(cmd[0], path, dir)
	if err != nil {
		return 0, err
	}
	c := &exec.Cmd{Path: exe, Args: cmd, Env: env, Dir: dir, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	var pipes *execPipes
	var master, slave *os.File
	if s.TTY {
		if master, slave, err = pty.Open("/dev/ptmx"); err != nil {
			return 0, err
		}
		c.Stdin, c.Stdout, c.Stderr = slave, slave, slave
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	} else {
		if pipes, err = newExecPipes(s.Stdin != nil); err != nil {
			return 0, err
		}
		c.Stdout, c.Stderr = pipes.stdout, pipes.stderr
		if pipes.stdin != nil {
			c.Stdin = pipes.stdin
		}
	}
	sess := &execSession{pipes: pipes, terminal: master}
	if master != nil {
		r.applyInitialSize(ctx, s, master)
	}
	placed, err := r.limits.startBorn(rc.p.uid, func() error {
		if r.cgroups != nil && rc.proc.cgroup != "" {
			return r.cgroups.startIn(c, rc.proc.cgroup)
		}
		return c.Start()
	})
	if pipes != nil {
		pipes.closeProcessEnds()
	} else {
		slave.Close()
	}
	if err != nil {
		sess.closeEnds()
		return 0, fmt.Errorf("starting %q: %w", exe, err)
	}
	pid := c.Process.Pid
	if !placed {
		if err := r.limits.place(rc.p.uid, pid); err != nil {
			r.log.Error(err, "Cannot put an exec in its pod's cgroups; its pod's limits do not apply to it", "pod", rc.p.uid, "pid", pid)
		}
	}

	sess.start(s)

	// The group is killed before its leader is reaped, while its ID is
	// still the leader's: at the leader's exit, or at once when ctx ends.
	var mu sync.Mutex
	reaped := false
	exited := make(chan ExitStatus, 1)
	go func() {
		werr := waitExitedNoReap(pid)
		mu.Lock()
		if werr == nil {
			_ = signalGroup(pid, syscall.SIGKILL)
		}
		werr = c.Wait()
		reaped = true
		mu.Unlock()
		exited <- exitStatus(werr, c.ProcessState)
	}()
	select {
	case st := <-exited:
		r.drainOutput(&sess.out, sess.closeEnds)
		sess.end()
		if st.Reason == ReasonStatusUnknown {
			return 0, errors.New(st.Message)
		}
		return int(st.Code), nil
	case <-ctx.Done():
		mu.Lock()
		if !reaped {
			_ = signalGroup(pid, syscall.SIGKILL)
		}
		mu.Unlock()
		<-exited
		sess.closeEnds()
		sess.end()
		return 0, ctx.Err()
	}
}
