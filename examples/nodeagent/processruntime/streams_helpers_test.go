package processruntime_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// sink collects what a session writes; a test waits for what it expects.
type sink struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{}
}

func newSink() *sink { return &sink{changed: make(chan struct{})} }

func (k *sink) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.b.Write(p)
	close(k.changed)
	k.changed = make(chan struct{})
	return len(p), nil
}

func (k *sink) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.b.String()
}

// waitFor waits until the sink holds want, failing after 30s.
func (k *sink) waitFor(t *testing.T, want string) {
	t.Helper()
	k.waitForN(t, want, 1)
}

// waitForN waits until the sink holds want n times, failing after 30s.
func (k *sink) waitForN(t *testing.T, want string, n int) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		k.mu.Lock()
		has, ch := strings.Count(k.b.String(), want) >= n, k.changed
		k.mu.Unlock()
		if has {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("not %d × %q in %q within 30s", n, want, k.String())
		}
	}
}

// execResult is what an exec gave.
type execResult struct {
	out, errOut string
	code        int
	err         error
}

// runExec runs cmd in container of pod uid, with stdin as its input
// ("": none), and returns what it gave. It fails the test after a
// minute.
func runExec(t *testing.T, rt *processruntime.Runtime, uid types.UID, container, stdin string, cmd ...string) execResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut := newSink(), newSink()
	s := processruntime.Streams{Stdout: out, Stderr: errOut}
	if stdin != "" {
		s.Stdin = strings.NewReader(stdin)
	}
	code, err := rt.Exec(ctx, uid, container, cmd, s)
	require.NoError(t, ctx.Err(), "the exec did not end within a minute")
	return execResult{out: out.String(), errOut: errOut.String(), code: code, err: err}
}

// session is an Exec or Attach running in a goroutine, its input a pipe.
type session struct {
	out, errOut *sink
	stdin       *io.PipeWriter
	resize      chan processruntime.TerminalSize
	done        chan sessionEnd
	cancel      context.CancelFunc
}

type sessionEnd struct {
	code int
	err  error
}

// newSession prepares the streams of a session, with input (stdin) and
// a terminal (tty) when asked.
func newSession(t *testing.T, stdin, tty bool) (*session, processruntime.Streams, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &session{out: newSink(), errOut: newSink(), done: make(chan sessionEnd, 1), cancel: cancel}
	streams := processruntime.Streams{Stdout: s.out, TTY: tty}
	if !tty {
		streams.Stderr = s.errOut
	}
	if stdin {
		var r *io.PipeReader
		r, s.stdin = io.Pipe()
		streams.Stdin = r
	}
	if tty {
		s.resize = make(chan processruntime.TerminalSize, 1)
		streams.Resize = s.resize
	}
	return s, streams, ctx
}

// startAttach attaches to container of pod uid in a goroutine.
func startAttach(t *testing.T, rt *processruntime.Runtime, uid types.UID, container string, stdin, tty bool) *session {
	s, streams, ctx := newSession(t, stdin, tty)
	go func() {
		err := rt.Attach(ctx, uid, container, streams)
		s.done <- sessionEnd{err: err}
	}()
	return s
}

// startExec runs cmd in container of pod uid in a goroutine.
func startExec(t *testing.T, rt *processruntime.Runtime, uid types.UID, container string, stdin, tty bool, cmd ...string) *session {
	s, streams, ctx := newSession(t, stdin, tty)
	go func() {
		code, err := rt.Exec(ctx, uid, container, cmd, streams)
		s.done <- sessionEnd{code: code, err: err}
	}()
	return s
}

// type writes to the session's input.
func (s *session) typeIn(t *testing.T, text string) {
	t.Helper()
	_, err := s.stdin.Write([]byte(text))
	require.NoError(t, err)
}

// wait waits for the session's end, failing after a minute.
func (s *session) wait(t *testing.T) sessionEnd {
	t.Helper()
	select {
	case e := <-s.done:
		return e
	case <-time.After(time.Minute):
		t.Fatal("the session did not end within a minute")
		return sessionEnd{}
	}
}

// waitRunning syncs pod and waits until its container name runs.
func waitRunning(t *testing.T, rt *processruntime.Runtime, pod *v1.Pod, name string) {
	t.Helper()
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "container "+name+" runs", func() bool {
		c, ok := status(t, rt, pod.UID).Container(name)
		if ok && c.Exit != nil && c.Exit.Reason == processruntime.ReasonStartError {
			t.Fatalf("container %s did not start: %s", name, c.Exit.Message)
		}
		return ok && c.State == processruntime.ContainerStateRunning
	})
}

// processesOf returns the live processes of container of pod uid: its
// main process, and the execs into it (which carry its environment).
func processesOf(t *testing.T, uid types.UID, container string) []processruntime.Process {
	t.Helper()
	var out []processruntime.Process
	for _, p := range processes(t, uid) {
		if p.Container == container {
			out = append(out, p)
		}
	}
	return out
}
