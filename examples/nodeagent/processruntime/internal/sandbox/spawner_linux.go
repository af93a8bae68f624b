//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spawner starts pods' sandboxes for a runtime. It runs the stage program
// (SpawnerOptions.Executable) once, as a process of the runtime's kept
// for the Spawner's life (the spawner stage, setup_linux.go), and has it
// set up each sandbox on a thread of its own: a pod's start then runs one
// new program, its init, rather than a setup program too, whose start-up
// (the Go runtime's, over a paravirtualized machine's page faults) was a
// third of a sandboxed start's CPU.
//
// The spawner starts with the first Start, and again with the next Start
// after it ended (a crash, a kill); Close ends it. Each init is the
// runtime's child all the same (the spawner starts it with CLONE_PARENT),
// so the runtime reaps it; a spawner's end ends no pod.
//
// A Spawner's methods are safe for concurrent use: Starts run at once
// (the spawner serves up to 16 together, the rest wait).
type Spawner struct {
	exe string

	mu sync.Mutex
	// cur is the running spawner, nil before the first Start, after it
	// ended, and after Close.
	cur    *spawnerProc
	closed bool
}

// SpawnerOptions configure a Spawner.
type SpawnerOptions struct {
	// Executable is the program the spawner, and the inits it starts,
	// run: one linking this package, built from the same source as the
	// caller (the stages' protocol is theirs alone), such as
	// processruntime's cmd/podkit-stages, whose start costs less CPU than
	// a large agent's. An absolute path; "" (the default) is the running
	// program itself (/proc/self/exe).
	Executable string
}

// NewSpawner returns a Spawner; it starts nothing. The error says what is
// wrong with opts.
func NewSpawner(opts SpawnerOptions) (*Spawner, error) {
	exe := opts.Executable
	if exe == "" {
		exe = selfExe
	} else if !filepath.IsAbs(exe) {
		return nil, fmt.Errorf("sandbox: SpawnerOptions.Executable %q is not an absolute path", exe)
	}
	return &Spawner{exe: exe}, nil
}

// ErrSpawnerClosed is Start's error after Close.
var ErrSpawnerClosed = errors.New("sandbox: the spawner is closed")

// Start starts the sandbox c describes and returns its init's PID, once
// the init is ready to serve the control socket. The init is a child of
// the calling process, which must reap it; it outlives the caller's exit
// as the caller's other children do. The error says what failed; nothing
// of the sandbox is left running then (an init that started is killed and
// reaped). ctx bounds the start: on its end Start returns its error at
// once and kills the init (now or when the spawner names it).
func (s *Spawner) Start(ctx context.Context, c *Config, l Launch) (int, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	cfg := *c
	if cfg.RootSize == 0 {
		cfg.RootSize = DefaultRootSize
	}
	if cfg.TmpSize == 0 {
		cfg.TmpSize = DefaultTmpSize
	}
	if l.Socket == "" {
		return 0, errors.New("sandbox: Launch.Socket is required")
	}
	if c.JoinNetNS != (l.NetNS != nil) {
		return 0, errors.New("sandbox: Config.JoinNetNS needs Launch.NetNS, and only it")
	}
	if len(l.JoinTasks) != len(l.LeaveTasks) {
		return 0, fmt.Errorf("sandbox: Launch has %d JoinTasks but %d LeaveTasks", len(l.JoinTasks), len(l.LeaveTasks))
	}
	listener, err := listen(l.Socket)
	if err != nil {
		return 0, err
	}
	defer listener.Close()
	log := l.Log
	if log == nil {
		if log, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			return 0, err
		}
		defer log.Close()
	}
	fds := []int{int(listener.Fd()), int(log.Fd())}
	if l.NetNS != nil {
		fds = append(fds, int(l.NetNS.Fd()))
	}
	req := &message{Op: opSpawn, Sandbox: &spawnRequest{Config: cfg, Env: l.Env, Cgroup: l.Cgroup, JoinTasks: l.JoinTasks, LeaveTasks: l.LeaveTasks}}
	var pid int
	for attempt := 0; ; attempt++ {
		var p *spawnerProc
		p, err = s.running()
		if err != nil {
			return 0, fmt.Errorf("sandbox: starting pod %s: %w", c.Name, err)
		}
		var unsent bool
		pid, unsent, err = p.spawn(ctx, req, fds)
		if unsent && attempt == 0 {
			// The spawner had ended before it got the request (a crash,
			// a kill, noticed only now): once more, with a new one.
			s.retire(p)
			continue
		}
		break
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return 0, fmt.Errorf("sandbox: starting pod %s: %w", c.Name, err)
	}
	return pid, nil
}

// Close ends the spawner, if it runs, and waits for it: it finishes the
// setups under way first, whose Starts return as they would have. Later
// Starts return ErrSpawnerClosed.
func (s *Spawner) Close() error {
	s.mu.Lock()
	p := s.cur
	s.cur, s.closed = nil, true
	s.mu.Unlock()
	if p != nil {
		p.stop()
	}
	return nil
}

// retire forgets p, a spawner found ended, so that running starts
// another.
func (s *Spawner) retire(p *spawnerProc) {
	s.mu.Lock()
	if s.cur == p {
		s.cur = nil
	}
	s.mu.Unlock()
	p.stop()
}

// running returns the running spawner, starting one if none runs.
func (s *Spawner) running() (*spawnerProc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrSpawnerClosed
	}
	if p := s.cur; p != nil {
		select {
		case <-p.done:
		default:
			return p, nil
		}
	}
	p, err := startSpawner(s.exe)
	if err != nil {
		return nil, err
	}
	s.cur = p
	return p, nil
}

// spawnerProc is one run of the spawner stage and the runtime's end of
// its connection.
type spawnerProc struct {
	cmd *exec.Cmd
	c   *net.UnixConn
	wmu sync.Mutex
	// stderr keeps the end of what the spawner wrote (a crash's message),
	// for the error of the spawns its end fails.
	stderr tail
	// done is closed once the reader has ended: the connection is gone and
	// the spawner reaped.
	done chan struct{}

	mu      sync.Mutex
	seq     uint64
	pending map[uint64]*spawnCall
}

// spawnCall is a spawn the runtime waits for: the init's PID as soon as
// the spawner names it, then the result.
type spawnCall struct {
	pid int
	// abandoned: nobody waits for the result any more; killed: its init
	// was killed and reaped (its PID may be another process's now).
	abandoned, killed bool
	result            chan *message
}

// toKillLocked returns the PID of the abandoned call's init that is to be
// killed now (pid, when the spawner names one), marking it killed; 0 for
// none. p.mu must be held.
func (call *spawnCall) toKillLocked(pid int) int {
	if !call.abandoned || call.killed {
		return 0
	}
	if pid <= 0 {
		pid = call.pid
	}
	if pid > 0 {
		call.killed = true
	}
	return pid
}

// spawnerStopWait bounds how long stop waits for the spawner to end by
// itself (its setups under way end within stageTimeout) before it kills
// it.
const spawnerStopWait = stageTimeout + 5*time.Second

func startSpawner(exe string) (*spawnerProc, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the spawner's connection: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "spawner")
	defer theirs.Close()
	ours, err := fileConn(pair[0])
	if err != nil {
		return nil, err
	}
	p := &spawnerProc{c: ours, done: make(chan struct{}), pending: map[uint64]*spawnCall{}}
	p.cmd = &exec.Cmd{
		Path:       exe,
		Args:       []string{"podkit-sandbox-spawner"},
		Env:        []string{MarkerEnv + "=" + stageSpawner, stageGORACE, stageGOMAXPROCS},
		Dir:        "/",
		Stdout:     &p.stderr,
		Stderr:     &p.stderr,
		ExtraFiles: []*os.File{theirs},
		// A process group of its own: a terminal's signals for the agent
		// do not reach it. It ends when the runtime's end of the
		// connection closes (with the runtime, at the latest).
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := p.cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("starting the sandbox spawner: %w", err)
	}
	go p.read()
	return p, nil
}

// tail is an io.Writer that keeps the last tailSize bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

// tailSize bounds what a tail keeps.
const tailSize = 2 << 10

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	if n >= tailSize {
		b = b[n-tailSize:]
	}
	if over := len(t.buf) + len(b) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, b...)
	return n, nil
}

// lastLine is the last non-empty line written.
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// read dispatches the spawner's messages until the connection ends, then
// reaps the spawner (which ends with the connection: it was closed, or
// the spawner died) and fails the spawns still waiting (killing and
// reaping their inits), saying what the spawner last wrote.
func (p *spawnerProc) read() {
	defer close(p.done)
	for {
		m, files, err := readFrame(p.c)
		closeFiles(files)
		if err != nil {
			p.c.Close()
			_ = p.cmd.Wait()
			var kill []int
			p.mu.Lock()
			calls := p.pending
			p.pending = nil
			gone := spawnerGone(err, p.stderr.lastLine()).Error()
			for _, call := range calls {
				if pid := call.toKillLocked(0); pid > 0 {
					kill = append(kill, pid)
				}
				call.result <- &message{Op: opReply, Error: gone}
			}
			p.mu.Unlock()
			for _, pid := range kill {
				killChild(pid)
			}
			return
		}
		p.mu.Lock()
		call := p.pending[m.Seq]
		kill := 0
		switch {
		case call == nil:
		case m.Op == opInit:
			call.pid = m.PID
			kill = call.toKillLocked(m.PID)
		case m.Op == opReply:
			delete(p.pending, m.Seq)
			if call.abandoned {
				kill = call.toKillLocked(m.PID)
			} else {
				call.result <- m
			}
		}
		p.mu.Unlock()
		if kill > 0 {
			killChild(kill)
		}
	}
}

// spawnerGone says why the spawns waiting failed: the connection's err,
// and the last line the spawner wrote (a crash's message), if any.
func spawnerGone(err error, last string) error {
	msg := "the sandbox spawner ended"
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		msg = "the sandbox spawner's connection failed: " + err.Error()
	}
	if last != "" {
		msg += " (it said: " + last + ")"
	}
	return errors.New(msg)
}

// spawn sends req and waits for the init to be ready, ctx's end or the
// spawner's. Any init it does not return is killed and reaped. unsent
// reports that the spawner had ended before the request reached it.
func (p *spawnerProc) spawn(ctx context.Context, req *message, fds []int) (pid int, unsent bool, err error) {
	call := &spawnCall{result: make(chan *message, 1)}
	p.mu.Lock()
	if p.pending == nil {
		p.mu.Unlock()
		return 0, true, errors.New("the sandbox spawner ended")
	}
	p.seq++
	req.Seq = p.seq
	p.pending[req.Seq] = call
	p.mu.Unlock()
	p.wmu.Lock()
	err = writeFrame(p.c, req, fds)
	p.wmu.Unlock()
	if err != nil {
		p.abandon(req.Seq, call)
		if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, net.ErrClosed) {
			return 0, false, fmt.Errorf("asking the sandbox spawner: %w", err)
		}
		// It had ended: its reader reaps it at once; say what it said.
		select {
		case <-p.done:
			return 0, true, spawnerGone(io.EOF, p.stderr.lastLine())
		case <-time.After(time.Second):
			return 0, true, fmt.Errorf("asking the sandbox spawner: %w", err)
		}
	}
	select {
	case m := <-call.result:
		if m.Error != "" || m.PID <= 0 {
			if call.pid > 0 {
				killChild(call.pid)
			}
			if m.Error == "" {
				m.Error = "the sandbox spawner named no init"
			}
			return 0, false, errors.New(m.Error)
		}
		return m.PID, false, nil
	case <-ctx.Done():
		p.abandon(req.Seq, call)
		return 0, false, ctx.Err()
	}
}

// abandon stops waiting for a spawn: its init, once named, is killed and
// reaped (by the reader, if the spawner has not named it yet).
func (p *spawnerProc) abandon(seq uint64, call *spawnCall) {
	p.mu.Lock()
	call.abandoned = true
	kill := 0
	if p.pending != nil && p.pending[seq] == call {
		kill = call.toKillLocked(0)
	} else {
		// Answered meanwhile, or the spawner ended: the result is there.
		select {
		case m := <-call.result:
			kill = call.toKillLocked(m.PID)
		default:
		}
	}
	p.mu.Unlock()
	if kill > 0 {
		killChild(kill)
	}
}

// stop closes the runtime's side of the connection, which ends the
// spawner once its setups under way have ended and answered (an init
// nobody waits for is killed), and waits for it, killing it after
// spawnerStopWait.
func (p *spawnerProc) stop() {
	_ = p.c.CloseWrite()
	select {
	case <-p.done:
	case <-time.After(spawnerStopWait):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// killChild kills and reaps a child of the caller.
func killChild(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return
		}
	}
}
