package action

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ExecRunner runs a command inside a running container: the one thing a
// runtime must supply for exec probes and exec hooks (lifecycle/probe and
// lifecycle/containerhook name it ExecRunner too; it is this type).
type ExecRunner interface {
	// ExecInContainer runs cmd (argv, not a shell line) in the container
	// whose ID is containerID, as the runtime reported it in the
	// container's status, and returns its combined stdout and stderr
	// and its exit code.
	//
	// It is called from a goroutine of its own, concurrently with other
	// calls. timeout is the command's limit (0: none, for hooks, which
	// are bounded by ctx alone), for runtimes that pass a number on (CRI
	// ExecSync); ctx ends at the same moment, and the runner must then
	// stop the command and return. A runner that does not is abandoned
	// at the timeout (the result is then a timeout), and the caller
	// waits for it only when it shuts down.
	//
	// err is for a command that could not be run at all (no such
	// container, a runtime error): the kubelet's "probe errored". A
	// command that ran and exited non-zero is a nil err and its exit
	// code. Output beyond MaxOutput bytes is dropped; the runner should
	// not buffer more.
	ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (output []byte, exitCode int, err error)
}

// ExecRunnerFunc adapts a function to an ExecRunner.
type ExecRunnerFunc func(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error)

// ExecInContainer calls f.
func (f ExecRunnerFunc) ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	return f(ctx, containerID, cmd, timeout)
}

var _ ExecRunner = ExecRunnerFunc(nil)

// Calls tracks the runner calls Exec started, so that their owner can
// wait for them when it shuts down. The zero value is ready.
type Calls struct {
	wg sync.WaitGroup
}

// Wait blocks until every call started so far has returned. A runner
// that never returns holds it forever: that is the runner's bug, as a
// hook that never returns holds the pod workers' Run.
func (c *Calls) Wait() { c.wg.Wait() }

// ErrNoRunner is the error of an exec action when no ExecRunner was
// given.
var ErrNoRunner = errors.New("no exec runner: the runtime gave none for exec actions")

// Exec runs cmd in containerID through r and returns what the kubelet's
// exec prober makes of it: Success with the output for exit code 0,
// Failure with the output for any other, Failure "command timed out" when
// ctx ended by WithTimeout's timeout first, Unknown with the error when
// the runner returned one, panicked, or was cut by ctx ending otherwise.
//
// The runner runs on a goroutine tracked by calls; done is closed when it
// returns, which may be after Exec returned (a runner that ignored its
// ctx). A caller that must not run a second command alongside a stuck one
// waits for done. A nil r gives Unknown with ErrNoRunner at once.
func Exec(ctx context.Context, calls *Calls, r ExecRunner, containerID string, cmd []string, timeout time.Duration) (res Result, done <-chan struct{}) {
	finished := make(chan struct{})
	if r == nil {
		close(finished)
		return unknown(ErrNoRunner), finished
	}
	type reply struct {
		out  []byte
		code int
		err  error
	}
	got := make(chan reply, 1)
	calls.wg.Add(1)
	go func() {
		defer calls.wg.Done()
		var rep reply
		func() {
			defer func() {
				if p := recover(); p != nil {
					rep = reply{err: fmt.Errorf("exec runner panicked: %v", p)}
				}
			}()
			rep.out, rep.code, rep.err = r.ExecInContainer(ctx, containerID, cmd, timeout)
		}()
		// finished closes before the reply is handed over, so a caller that
		// has the reply sees the runner as returned (the probe retries an
		// errored check only then).
		close(finished)
		got <- rep
	}()
	var rep reply
	select {
	case rep = <-got:
	case <-ctx.Done():
		// A runner that has returned by now wins; one that has not is
		// abandoned (done tells when it returns).
		select {
		case rep = <-got:
		default:
			rep = reply{err: ctx.Err()}
		}
	}
	if rep.err != nil {
		// A command that finished before the timer fired keeps its
		// result; only a call cut by the timeout is a timeout.
		if TimedOut(ctx) {
			return failure(fmt.Sprintf("command %s timed out", quoteCommand(cmd))), finished
		}
		return unknown(rep.err), finished
	}
	out := rep.out
	if len(out) > MaxOutput {
		out = out[:MaxOutput]
	}
	if rep.code != 0 {
		return Result{Outcome: Failure, Output: string(out), ExitCode: rep.code}, finished
	}
	return Result{Outcome: Success, Output: string(out)}, finished
}

// quoteCommand renders cmd as the kubelet's CRI timeout message does: the
// argv joined by spaces, quoted.
func quoteCommand(cmd []string) string {
	return fmt.Sprintf("%q", strings.Join(cmd, " "))
}
