//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/unixsock"
)

// Conn is the agent's connection to a sandbox's init (see protocol.go).
// Its methods are safe for concurrent use; each blocks until the init
// answers, ctx ends or the connection does.
type Conn struct {
	c *net.UnixConn
	// wmu serializes writes.
	wmu sync.Mutex
	// done is closed once the reader goroutine has ended; err says why.
	done chan struct{}
	err  error

	mu   sync.Mutex
	seq  uint64
	wait map[uint64]chan reply
	// exits holds the exits the init announced or listed, by process
	// name, until Forget; exited is closed and replaced at each.
	exits  map[string]ExitStatus
	exited chan struct{}
}

type reply struct {
	m     *message
	files []*os.File
}

// Dial connects to the control socket of a sandbox at path. It starts the
// goroutine that reads the init's messages; Close ends it.
func Dial(path string) (*Conn, error) {
	conn, err := unixsock.Dial(path)
	if err != nil {
		return nil, fmt.Errorf("sandbox: connecting to the pod's init: %w", err)
	}
	c := &Conn{c: conn, done: make(chan struct{}), wait: map[uint64]chan reply{}, exits: map[string]ExitStatus{}, exited: make(chan struct{})}
	go c.read()
	return c, nil
}

// Close ends the connection and waits for its reader. The init and the
// pod keep running; a later Dial reconnects.
func (c *Conn) Close() error {
	c.c.Close()
	<-c.done
	return nil
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

func (c *Conn) read() {
	defer close(c.done)
	for {
		m, files, err := readFrame(c.c)
		if err != nil {
			c.mu.Lock()
			c.err = err
			for seq, ch := range c.wait {
				close(ch)
				delete(c.wait, seq)
			}
			close(c.exited)
			c.exited = nil
			c.mu.Unlock()
			c.c.Close()
			return
		}
		c.mu.Lock()
		switch {
		case m.Op == opExited && m.Exit != nil:
			c.recordExitLocked(m.Name, *m.Exit)
		case m.Op == opReply && c.wait[m.Seq] != nil:
			c.wait[m.Seq] <- reply{m: m, files: files}
			delete(c.wait, m.Seq)
			files = nil
		}
		c.mu.Unlock()
		for _, f := range files {
			f.Close()
		}
	}
}

func (c *Conn) recordExitLocked(name string, st ExitStatus) {
	if _, ok := c.exits[name]; ok {
		return
	}
	c.exits[name] = st
	close(c.exited)
	c.exited = make(chan struct{})
}

// call sends a request and waits for its reply. The reply's descriptors
// are the caller's.
func (c *Conn) call(ctx context.Context, m *message, fds []int) (*message, []*os.File, error) {
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.exited == nil {
		c.mu.Unlock()
		return nil, nil, ErrGone
	}
	c.seq++
	m.Seq = c.seq
	c.wait[m.Seq] = ch
	c.mu.Unlock()
	c.wmu.Lock()
	err := writeFrame(c.c, m, fds)
	c.wmu.Unlock()
	if err != nil {
		c.forgetCall(m.Seq)
		return nil, nil, fmt.Errorf("sandbox: %s: %w", m.Op, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, nil, ErrGone
		}
		if r.m.Error != "" {
			for _, f := range r.files {
				f.Close()
			}
			return nil, nil, errors.New(r.m.Error)
		}
		return r.m, r.files, nil
	case <-ctx.Done():
		c.forgetCall(m.Seq)
		return nil, nil, ctx.Err()
	}
}

// forgetCall stops waiting for a reply; one that still arrives is
// dropped (its descriptors closed).
func (c *Conn) forgetCall(seq uint64) {
	c.mu.Lock()
	ch := c.wait[seq]
	delete(c.wait, seq)
	c.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case r, ok := <-ch:
		if ok {
			for _, f := range r.files {
				f.Close()
			}
		}
	default:
	}
}

// Create runs the container stage of a new process named name (unique
// among the processes the init knows) up to the execve of its command:
// its view and identity are in place, and it waits for Start. stdio is
// its standard streams (the caller keeps its copies; see Stdio). The
// error is the stage's (a missing command, a volume that cannot be
// mounted, a ViewOf process that does not run, ...) or the connection's.
func (c *Conn) Create(ctx context.Context, name string, spec *ProcessSpec, stdio Stdio) (Process, error) {
	fds, err := stdio.fds()
	if err != nil {
		return Process{}, err
	}
	m, files, err := c.call(ctx, &message{Op: opCreate, Name: name, Spec: spec, TTY: stdio.TTY}, fds)
	if err != nil {
		return Process{}, err
	}
	p := Process{PodPID: m.PID}
	if len(files) >= 1 {
		p.HostPID = pidfdPID(files[0])
	}
	if stdio.TTY && len(files) == 2 {
		p.Terminal, files = files[1], files[:1]
	}
	closeFiles(files)
	switch {
	case p.HostPID <= 0:
		err = errors.New("sandbox: the created process ended at once")
	case stdio.TTY && p.Terminal == nil:
		err = errors.New("sandbox: the init sent no terminal")
	}
	if err != nil {
		if p.Terminal != nil {
			p.Terminal.Close()
		}
		return Process{}, err
	}
	if p.Terminal != nil {
		if p.Terminal, err = pollable(p.Terminal); err != nil {
			return Process{}, err
		}
	}
	return p, nil
}

// Start lets the created process name execute its command. The error
// says why it could not (exec failed: the process has ended).
func (c *Conn) Start(ctx context.Context, name string) error {
	_, files, err := c.call(ctx, &message{Op: opStart, Name: name}, nil)
	closeFiles(files)
	return err
}

// Signal sends sig to the process group of process name, unless it has
// ended (the init reaps its processes, so the group cannot have been
// reused in between).
func (c *Conn) Signal(ctx context.Context, name string, sig syscall.Signal) error {
	_, files, err := c.call(ctx, &message{Op: opSignal, Name: name, Signal: int(sig)}, nil)
	closeFiles(files)
	return err
}

// List returns every process the init knows, with the host PIDs of those
// that run. The exits it lists are recorded as if announced (Exit).
func (c *Conn) List(ctx context.Context) ([]ProcessState, error) {
	m, files, err := c.call(ctx, &message{Op: opList}, nil)
	if err != nil {
		return nil, err
	}
	defer closeFiles(files)
	i := 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for j := range m.Procs {
		p := &m.Procs[j]
		if p.HasFD && i < len(files) {
			p.HostPID = pidfdPID(files[i])
			i++
		}
		if p.Exit != nil {
			c.recordExitLocked(p.Name, *p.Exit)
		}
	}
	return m.Procs, nil
}

// Forget drops an exited process from the init's table (and its exit
// from the Conn's), once the agent has recorded its exit.
func (c *Conn) Forget(ctx context.Context, name string) error {
	_, files, err := c.call(ctx, &message{Op: opForget, Name: name}, nil)
	closeFiles(files)
	if err == nil {
		c.mu.Lock()
		delete(c.exits, name)
		c.mu.Unlock()
	}
	return err
}

// Exit returns the exit of process name once the init has announced or
// listed it: ok is false while it runs. The channel is closed at the
// next exit recorded, so a caller waits for its process by looping on
// it; it is nil once the connection has ended.
func (c *Conn) Exit(name string) (st ExitStatus, ok bool, next <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok = c.exits[name]
	return st, ok, c.exited
}

// Wait blocks until process name has exited (as Exit reports), ctx ends
// or the connection does (ErrGone).
func (c *Conn) Wait(ctx context.Context, name string) (ExitStatus, error) {
	for {
		st, ok, next := c.Exit(name)
		if ok {
			return st, nil
		}
		if next == nil {
			return ExitStatus{}, ErrGone
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ExitStatus{}, ctx.Err()
		}
	}
}

// pollable returns f as a file in non-blocking mode, so that its reads
// wait in the Go runtime's poller and Close ends them (a received
// descriptor is in blocking mode). f is closed.
func pollable(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return os.NewFile(uintptr(fd), "pty-master"), nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// pidfdPID reads the PID, in the caller's PID namespace, of the process
// a pidfd refers to (0 once it has been reaped).
func pidfdPID(f *os.File) int {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid < 0 {
				return 0
			}
			return pid
		}
	}
	return 0
}
