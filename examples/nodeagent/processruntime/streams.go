package processruntime

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/pty"
)

// This file holds what exec and attach sessions share: their streams, and
// finding the running container they are for.

// Streams are the client's ends of an exec or attach session (kubectl
// exec, attach, cp, debug -it). Only what the client asked for is set.
// The runtime copies between them and the process until the session
// ends; it does not use them after returning, except that a goroutine
// blocked reading Stdin ends only when that Read returns (the session's
// end, closing Stdin, returns it).
type Streams struct {
	// Stdin is the client's input, nil when it sends none; its io.EOF
	// ends the process's stdin (exec), or the session (attach, see
	// Runtime.Attach).
	Stdin io.Reader
	// Stdout and Stderr carry the process's output, each nil when not
	// asked for. With a terminal, all of it goes to Stdout.
	Stdout, Stderr io.Writer
	// TTY asks for a terminal (exec -t): the process gets one, opened in
	// its pod, whose output is Stdout's.
	TTY bool
	// Resize delivers the client's terminal size, first the initial one;
	// applied to the process's terminal, ignored without one. May be nil.
	Resize <-chan TerminalSize
}

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Width, Height uint16
}

var (
	// ErrNotFound is wrapped by the errors of Exec, Attach and
	// PortForward for a pod or container the runtime does not have.
	ErrNotFound = errors.New("processruntime: not found")
	// ErrNotRunning is wrapped by the errors of Exec and Attach for a
	// container whose process does not run, and of PortForward for a pod
	// whose sandbox does not run.
	ErrNotRunning = errors.New("processruntime: not running")
)

// runningContainer is a running container, as a session finds it.
type runningContainer struct {
	p    *podState
	c    *container
	proc *proc
	// pod is the pod SyncPod last had, and spec the container's spec in
	// it; both nil for a pod adopted from an earlier run and not synced
	// since.
	pod  *v1.Pod
	spec *v1.Container
}

// findRunning finds container name of pod uid and its running process.
func (r *Runtime) findRunning(uid types.UID, name string) (runningContainer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[uid]
	if p == nil || p.cleanedUp {
		return runningContainer{}, fmt.Errorf("%w: pod %s", ErrNotFound, uid)
	}
	c := p.containers[name]
	if c == nil {
		return runningContainer{}, fmt.Errorf("%w: container %q in pod %s/%s", ErrNotFound, name, p.namespace, p.name)
	}
	if c.proc == nil || p.terminating {
		return runningContainer{}, fmt.Errorf("%w: container %q of pod %s/%s", ErrNotRunning, name, p.namespace, p.name)
	}
	rc := runningContainer{p: p, c: c, proc: c.proc, pod: p.spec}
	if p.spec != nil {
		rc.spec = findContainer(p.spec, name)
	}
	return rc, nil
}

// forwardResizes applies each size of resize to the terminal master
// until resize closes or done is closed.
func forwardResizes(resize <-chan TerminalSize, master *os.File, done <-chan struct{}) {
	if resize == nil {
		return
	}
	for {
		select {
		case size, ok := <-resize:
			if !ok {
				return
			}
			if size.Width > 0 && size.Height > 0 {
				_ = pty.SetSize(master, size.Width, size.Height)
			}
		case <-done:
			return
		}
	}
}

// copyOut copies src (a pipe's read end, or a terminal master) to dst
// (io.Discard when nil) until src's end; a failed write to dst drops the
// rest, still draining src so the process is never held up.
func copyOut(dst io.Writer, src *os.File, terminal bool) {
	if dst == nil {
		dst = io.Discard
	}
	buf := make([]byte, 32<<10)
	for {
		var n int
		var err error
		if terminal {
			n, err = pty.ReadMaster(src, buf)
		} else {
			n, err = src.Read(buf)
		}
		if n > 0 && dst != io.Discard {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				dst = io.Discard
			}
		}
		if err != nil {
			return
		}
	}
}

// copyIn copies src to dst until src ends, then closes dst when
// closeAtEnd (a pipe: the process reads end of file).
func copyIn(dst *os.File, src io.Reader, closeAtEnd bool) {
	_, _ = io.Copy(dst, src)
	if closeAtEnd {
		dst.Close()
	}
}

// outputs copies a session's output pipes in goroutines of their own;
// wait waits for them.
type outputs struct{ wg sync.WaitGroup }

func (o *outputs) copy(dst io.Writer, src *os.File, terminal bool) {
	o.wg.Go(func() { copyOut(dst, src, terminal) })
}

func (o *outputs) wait() { o.wg.Wait() }
