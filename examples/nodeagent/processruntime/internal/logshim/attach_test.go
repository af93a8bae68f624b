//go:build linux

package logshim

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/pty"
)

// testShim is a real shim process (this test binary run again with
// MarkerEnv), with the test holding the container's ends.
type testShim struct {
	t    *testing.T
	dir  string
	mode Mode
	// stdout and stderr are the container's output ends; stdin the read
	// end of its stdin (Mode.Stdin without TTY); slave its terminal (TTY).
	stdout, stderr, stdin, slave *os.File
	exited                       chan error
}

func startShim(t *testing.T, mode Mode) *testShim {
	t.Helper()
	ts := &testShim{t: t, dir: t.TempDir(), mode: mode, exited: make(chan error, 1)}
	lock, err := CreateLock(ts.dir, 0)
	require.NoError(t, err)
	defer lock.Close()
	listener, err := ListenAttach(ts.dir, 0)
	require.NoError(t, err)
	defer listener.Close()
	var shimFiles []*os.File // what the shim gets, closed here once it has them
	extra := make([]*os.File, 5)
	if mode.TTY {
		master, slave, err := pty.Open("/dev/ptmx")
		require.NoError(t, err)
		extra[0], ts.slave = master, slave
		shimFiles = append(shimFiles, master)
	} else {
		for i, mine := range []**os.File{&ts.stdout, &ts.stderr} {
			r, w, err := os.Pipe()
			require.NoError(t, err)
			extra[i], *mine = r, w
			shimFiles = append(shimFiles, r)
		}
		if mode.Stdin {
			r, w, err := os.Pipe()
			require.NoError(t, err)
			extra[4], ts.stdin = w, r
			shimFiles = append(shimFiles, w)
		}
	}
	extra[2], extra[3] = lock, listener
	cmd := exec.Command("/proc/self/exe", Args(ts.dir, 0, 1<<20, 10, mode)...)
	cmd.Env = []string{MarkerEnv + "=1", "GORACE=atexit_sleep_ms=0"}
	cmd.ExtraFiles = extra
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	require.NoError(t, cmd.Start())
	for _, f := range shimFiles {
		f.Close()
	}
	go func() {
		err := cmd.Wait()
		if err != nil {
			t.Logf("shim: %v: %s", err, errOut.String())
		}
		ts.exited <- err
	}()
	t.Cleanup(func() {
		ts.end()
		select {
		case <-ts.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("the shim did not end after its container did")
		}
	})
	return ts
}

// end closes the container's ends, as its exit does.
func (ts *testShim) end() {
	for _, f := range []*os.File{ts.stdout, ts.stderr, ts.stdin, ts.slave} {
		if f != nil {
			f.Close()
		}
	}
}

// waitExit waits for the shim to end.
func (ts *testShim) waitExit() {
	ts.t.Helper()
	select {
	case err := <-ts.exited:
		require.NoError(ts.t, err)
		ts.exited <- err
	case <-time.After(30 * time.Second):
		ts.t.Fatal("the shim did not end")
	}
}

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

// waitFor waits until the sink holds want.
func (k *sink) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		k.mu.Lock()
		has, ch := strings.Contains(k.b.String(), want), k.changed
		k.mu.Unlock()
		if has {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no %q in %q within 30s", want, k.String())
		}
	}
}

// session is an Attach running in a goroutine.
type session struct {
	out, errOut *sink
	stdin       *io.PipeWriter
	resize      chan TerminalSize
	granted     chan Attached
	done        chan error
	cancel      context.CancelFunc
}

func attach(t *testing.T, ts *testShim, stdin, stderr bool) *session {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{out: newSink(), granted: make(chan Attached, 1), done: make(chan error, 1), cancel: cancel, resize: make(chan TerminalSize)}
	streams := AttachStreams{Stdout: s.out, Resize: s.resize}
	if stderr {
		s.errOut = newSink()
		streams.Stderr = s.errOut
	}
	if stdin {
		var inR *io.PipeReader
		inR, s.stdin = io.Pipe()
		streams.Stdin = inR
	}
	go func() { s.done <- Attach(ctx, ts.dir, 0, streams, func(a Attached) { s.granted <- a }) }()
	t.Cleanup(cancel)
	return s
}

// readLine reads one line of r (without the newline).
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	return strings.TrimRight(line, "\r\n")
}

func (s *session) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the attach session did not end")
		return nil
	}
}

// Two sessions share the container's output, each stream where it
// belongs, while the shim logs it as before; its end ends both.
func TestAttachSessionsShareTheOutput(t *testing.T) {
	ts := startShim(t, Mode{})
	a, b := attach(t, ts, false, true), attach(t, ts, false, true)
	for _, s := range []*session{a, b} {
		assert.Equal(t, Attached{}, <-s.granted, "no stdin, no terminal")
	}
	_, err := ts.stdout.WriteString("to stdout\n")
	require.NoError(t, err)
	_, err = ts.stderr.WriteString("to stderr\n")
	require.NoError(t, err)
	ts.end()
	for _, s := range []*session{a, b} {
		assert.NoError(t, s.wait(t), "the output's end ends the session cleanly")
		assert.Equal(t, "to stdout\n", s.out.String())
		assert.Equal(t, "to stderr\n", s.errOut.String())
	}
	ts.waitExit()
	assert.ElementsMatch(t, []string{"stdout F to stdout", "stderr F to stderr"}, texts(readRecords(t, ts.dir)))
	_, err = os.Stat(ts.dir + "/" + AttachSocketName(0))
	assert.ErrorIs(t, err, os.ErrNotExist, "the shim removes its socket")
	err = Attach(context.Background(), ts.dir, 0, AttachStreams{Stdout: io.Discard}, nil)
	assert.ErrorIs(t, err, ErrNoAttach)
}

// Without stdinOnce, stdin stays open across sessions: one session's
// input reaches the container, its end of input ends that session only,
// and the next session types on.
func TestStdinStaysOpenAcrossSessions(t *testing.T) {
	ts := startShim(t, Mode{Stdin: true})
	in := bufio.NewReader(ts.stdin)
	a := attach(t, ts, true, false)
	assert.Equal(t, Attached{Stdin: true}, <-a.granted)
	_, err := a.stdin.Write([]byte("first\n"))
	require.NoError(t, err)
	assert.Equal(t, "first", readLine(t, in))
	a.stdin.Close()
	assert.NoError(t, a.wait(t), "the end of the client's input ends its session")

	b := attach(t, ts, true, false)
	assert.Equal(t, Attached{Stdin: true}, <-b.granted, "stdin is still open")
	_, err = b.stdin.Write([]byte("second\n"))
	require.NoError(t, err)
	assert.Equal(t, "second", readLine(t, in))
	b.cancel()
	assert.NoError(t, b.wait(t))

	// A session that did not ask for stdin is not given it.
	c := attach(t, ts, false, false)
	assert.Equal(t, Attached{}, <-c.granted)
	c.cancel()
	assert.NoError(t, c.wait(t))
}

// With stdinOnce, the container's stdin closes when the first session
// with input ends, and later sessions get output only; the output goes
// on after the client's input ended.
func TestStdinOnceClosesStdinAfterTheFirstSession(t *testing.T) {
	ts := startShim(t, Mode{Stdin: true, StdinOnce: true})
	a := attach(t, ts, true, false)
	assert.Equal(t, Attached{Stdin: true, StdinOnce: true}, <-a.granted)
	_, err := a.stdin.Write([]byte("only once\n"))
	require.NoError(t, err)
	a.stdin.Close()
	assert.Equal(t, "only once\n", readToEnd(t, ts.stdin), "the container reads its input, then end of file")

	_, err = ts.stdout.WriteString("still attached\n")
	require.NoError(t, err)
	a.out.waitFor(t, "still attached\n") // without a terminal, the session goes on after its input ended

	b := attach(t, ts, true, false)
	assert.Equal(t, Attached{StdinOnce: true}, <-b.granted, "stdin was closed: output only")
	ts.end()
	for _, s := range []*session{a, b} {
		assert.NoError(t, s.wait(t))
	}
}

// With a terminal, a shell on its slave gets the session's size and
// input; its output, echo included, comes back as one stream and is
// logged as stdout.
func TestAttachToATerminal(t *testing.T) {
	ts := startShim(t, Mode{TTY: true, Stdin: true})
	cmd := exec.Command("sh", "-c", `read line; echo "size $(stty size) got $line"`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ts.slave, ts.slave, ts.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	s := attach(t, ts, true, true)
	assert.Equal(t, Attached{Stdin: true, TTY: true}, <-s.granted)
	s.resize <- TerminalSize{Width: 120, Height: 40}
	waitSize(t, ts.slave, 120, 40)
	_, err := s.stdin.Write([]byte("typed\n"))
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ts.slave.Close()
	ts.slave = nil
	require.NoError(t, cmd.Wait())
	assert.NoError(t, s.wait(t))
	assert.Equal(t, "typed\r\nsize 40 120 got typed\r\n", s.out.String(), "the echo, then the shell's line, on stdout")
	assert.Empty(t, s.errOut.String())
	ts.waitExit()
	assert.Equal(t, []string{"stdout F typed", "stdout F size 40 120 got typed"}, texts(readRecords(t, ts.dir)))
}

// readToEnd reads r to its end, failing the test after 30s.
func readToEnd(t *testing.T, r io.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no end of file within 30s")
		return ""
	}
}

// waitSize waits until the terminal of slave has the size.
func waitSize(t *testing.T, slave *os.File, width, height uint16) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		ws, err := unix.IoctlGetWinsize(int(slave.Fd()), unix.TIOCGWINSZ)
		require.NoError(t, err)
		if ws.Col == width && ws.Row == height {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("the terminal is %dx%d, not %dx%d", ws.Col, ws.Row, width, height)
		}
	}
}

// A session that does not read is ended once more than maxClientQueue
// bytes wait for it, and says so; the container is never held up, and the
// log has everything.
func TestASessionFallingBehindIsEnded(t *testing.T) {
	ts := startShim(t, Mode{})
	conn, err := dialAttach(ts.dir, 0)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, writeFrame(conn, frameHello, []byte{attachStdout}))
	line := strings.Repeat("x", 1023) + "\n"
	for range 4 * maxClientQueue / len(line) {
		_, err := ts.stdout.WriteString(line)
		require.NoError(t, err, "the container's writes never wait for a session")
	}
	buf := make([]byte, maxAttachPayload)
	var end string
	for {
		typ, p, err := readFrame(conn, buf)
		require.NoError(t, err)
		if typ == frameEnd {
			end = string(p)
			break
		}
	}
	assert.Contains(t, end, "fell more than 1 MiB behind")
	ts.end()
	ts.waitExit()
	assert.Equal(t, 4*maxClientQueue/len(line), len(readRecords(t, ts.dir)), "the log has every line")
}

// A frame longer than the protocol allows ends the reader with an error,
// never an allocation of what the header claims.
func TestAnOversizedFrameIsRefused(t *testing.T) {
	var b bytes.Buffer
	b.Write([]byte{frameInput, 0xff, 0xff, 0xff, 0xff})
	_, _, err := readFrame(&b, make([]byte, maxAttachPayload))
	assert.ErrorContains(t, err, "exceeds")
}
