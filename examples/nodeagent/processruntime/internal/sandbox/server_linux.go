//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/pty"
)

// This file is the init's side of the control protocol (protocol.go) and
// its reaper.

// stageTimeout bounds how long the init waits for a container stage to
// set up (create) or to execute its command (start).
const stageTimeout = 30 * time.Second

// server is the init's state: the processes it started, and the agent's
// connection.
type server struct {
	// mu guards procs, byPID, conn and every sproc. The reaper holds it
	// while it waits and reaps, and create while it forks and records, so
	// a process is never reaped before it is known.
	mu    sync.Mutex
	procs map[string]*sproc
	// byPID holds the processes not reaped yet, by PID in the pod.
	byPID map[int]*sproc
	conn  *net.UnixConn
	// wmu serializes writes to a connection.
	wmu sync.Mutex
}

// sproc is one process the init started.
type sproc struct {
	name string
	pid  int
	// ctl is the init's end of the stage's control socket, until start
	// ran.
	ctl *net.UnixConn
	// started: the command was executed. failed: create or start failed;
	// the process is dropped once reaped.
	started, failed bool
	// exit is set once the process is reaped; announced once the agent was
	// sent its "exited".
	exit      *ExitStatus
	announced bool
}

func newServer() *server {
	return &server{procs: map[string]*sproc{}, byPID: map[int]*sproc{}}
}

// serve reaps and serves the control socket until the init is killed.
func (s *server) serve(l *net.UnixListener) error {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		for {
			s.reapAll()
			<-sigs
		}
	}()
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors: try again
			continue
		}
		s.mu.Lock()
		old := s.conn
		s.conn = c
		s.mu.Unlock()
		if old != nil {
			old.Close()
		}
		go s.handle(c)
	}
}

// handle serves one connection's requests, in order.
func (s *server) handle(c *net.UnixConn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		if s.conn == c {
			s.conn = nil
		}
		s.mu.Unlock()
	}()
	// Requests run concurrently (a slow create does not hold up a signal),
	// at most maxConcurrent at a time; each reply carries its Seq.
	slots := make(chan struct{}, maxConcurrent)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		m, files, err := readFrame(c)
		if err != nil {
			return
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			reply, fds, after := s.dispatch(m, files)
			for _, f := range files {
				f.Close()
			}
			reply.Op, reply.Seq = opReply, m.Seq
			err := s.write(c, reply, fds)
			for _, fd := range fds {
				unix.Close(fd)
			}
			if err != nil {
				return
			}
			for _, ev := range after {
				if s.write(c, ev, nil) != nil {
					return
				}
			}
		})
	}
}

// maxConcurrent bounds the requests of a connection served at once.
const maxConcurrent = 16

func (s *server) write(c *net.UnixConn, m *message, fds []int) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return writeFrame(c, m, fds)
}

// dispatch runs one request. It returns the reply, the descriptors to
// send with it (closed after), and messages to send after it.
func (s *server) dispatch(m *message, files []*os.File) (reply *message, fds []int, after []*message) {
	fail := func(format string, args ...any) (*message, []int, []*message) {
		return &message{Error: fmt.Sprintf(format, args...)}, nil, nil
	}
	switch m.Op {
	case opCreate:
		if m.TTY != (len(files) == 0) || len(files) > 3 || len(files) == 1 {
			return fail("create needs stdout, stderr and perhaps stdin, or a terminal; got %d descriptors", len(files))
		}
		pid, fds, err := s.create(m.Name, m.Spec, m.TTY, files)
		if err != nil {
			return fail("%v", err)
		}
		return &message{PID: pid}, fds, nil
	case opStart:
		ev, err := s.start(m.Name)
		if err != nil {
			return fail("%v", err)
		}
		if ev != nil {
			after = append(after, ev)
		}
		return &message{}, nil, after
	case opSignal:
		s.mu.Lock()
		defer s.mu.Unlock()
		p := s.procs[m.Name]
		if p == nil {
			return fail("no process %q", m.Name)
		}
		if p.exit == nil {
			if err := unix.Kill(-p.pid, syscall.Signal(m.Signal)); err != nil && err != unix.ESRCH {
				return fail("signalling %q: %v", m.Name, err)
			}
		}
		return &message{}, nil, nil
	case opList:
		s.mu.Lock()
		defer s.mu.Unlock()
		reply = &message{}
		for _, p := range s.procs {
			ps := ProcessState{Name: p.name, PodPID: p.pid, Exit: p.exit}
			switch {
			case p.exit != nil:
				ps.State = StateExited
			case p.started:
				ps.State = StateRunning
			default:
				ps.State = StateCreated
			}
			if p.exit == nil && len(fds) < maxFDs {
				if fd, err := unix.PidfdOpen(p.pid, 0); err == nil {
					fds = append(fds, fd)
					ps.HasFD = true
				}
			}
			if ps.State == StateExited {
				p.announced = true
			}
			reply.Procs = append(reply.Procs, ps)
		}
		return reply, fds, nil
	case opForget:
		s.mu.Lock()
		defer s.mu.Unlock()
		p := s.procs[m.Name]
		if p != nil && p.exit == nil {
			return fail("process %q has not ended", m.Name)
		}
		delete(s.procs, m.Name)
		return &message{}, nil, nil
	}
	return fail("unknown operation %q", m.Op)
}

// create starts the container stage of process name, and waits until it
// is ready to execute its command. stdio is stdout, stderr and perhaps
// stdin; with tty, none, and the init opens a terminal for it. It returns
// the process's PID in the pod and the descriptors of the reply: a pidfd
// of it, then its terminal's master.
func (s *server) create(name string, spec *ProcessSpec, tty bool, stdio []*os.File) (int, []int, error) {
	if name == "" || spec == nil {
		return 0, nil, errors.New("create needs a name and a spec")
	}
	if err := spec.Validate(); err != nil {
		return 0, nil, err
	}
	// held are closed once the stage has its copies.
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	var in, out, errOut *os.File
	masterFD := -1
	if tty {
		master, slave, err := pty.Open("/dev/ptmx")
		if err != nil {
			return 0, nil, err
		}
		masterFD, err = unix.FcntlInt(master.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		master.Close()
		if err != nil {
			slave.Close()
			return 0, nil, err
		}
		held = append(held, slave)
		in, out, errOut = slave, slave, slave
	} else {
		out, errOut = stdio[0], stdio[1]
		if len(stdio) == 3 {
			in = stdio[2]
		} else {
			devNull, err := os.Open(os.DevNull)
			if err != nil {
				return 0, nil, err
			}
			held = append(held, devNull)
			in = devNull
		}
	}
	failEarly := func(err error) (int, []int, error) {
		if masterFD >= 0 {
			unix.Close(masterFD)
		}
		return 0, nil, err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return failEarly(err)
	}
	ours, err := fileConn(pair[0])
	if err != nil {
		unix.Close(pair[1])
		return failEarly(err)
	}
	held = append(held, os.NewFile(uintptr(pair[1]), "stage-control"))
	files := []uintptr{in.Fd(), out.Fd(), errOut.Fd(), uintptr(pair[1])}
	// A mount namespace of its own for the container's view (or, to enter
	// another process's, the init's until it does), and a session (so a
	// process group) of its own.
	clone := uintptr(syscall.CLONE_NEWNS)
	s.mu.Lock()
	if s.procs[name] != nil {
		s.mu.Unlock()
		ours.Close()
		return failEarly(fmt.Errorf("a process named %q exists", name))
	}
	if spec.ViewOf != "" {
		// Opened while the process cannot be reaped (the reaper holds mu),
		// so its PID is still its own.
		v := s.procs[spec.ViewOf]
		if v == nil || !v.started || v.exit != nil {
			s.mu.Unlock()
			ours.Close()
			return failEarly(fmt.Errorf("process %q, whose view the new process would enter, does not run", spec.ViewOf))
		}
		ns, err := os.Open("/proc/" + strconv.Itoa(v.pid) + "/ns/mnt")
		if err != nil {
			s.mu.Unlock()
			ours.Close()
			return failEarly(fmt.Errorf("opening the mount namespace of %q: %w", spec.ViewOf, err))
		}
		held = append(held, ns)
		files = append(files, ns.Fd())
		clone = 0
	}
	pid, err := syscall.ForkExec(selfExe, []string{"podkit-sandbox-container"}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{MarkerEnv + "=" + stageContainer, stageGORACE, stageGOMAXPROCS},
		Files: files,
		Sys:   &syscall.SysProcAttr{Cloneflags: clone, Setsid: true},
	})
	var p *sproc
	if err == nil {
		p = &sproc{name: name, pid: pid, ctl: ours}
		s.procs[name], s.byPID[pid] = p, p
	}
	s.mu.Unlock()
	if err != nil {
		ours.Close()
		return failEarly(fmt.Errorf("starting the container stage: %w", err))
	}
	fail := func(err error) (int, []int, error) {
		_ = unix.Kill(pid, unix.SIGKILL)
		s.drop(p)
		return failEarly(err)
	}
	if err := ours.SetDeadline(time.Now().Add(stageTimeout)); err != nil {
		return fail(err)
	}
	if err := writeFrame(ours, &message{Op: "spec", Spec: spec, TTY: tty}, nil); err != nil {
		return fail(fmt.Errorf("sending the container stage its spec: %w", err))
	}
	m, _, err := readFrame(ours)
	switch {
	case err != nil:
		return fail(fmt.Errorf("the container stage ended while setting up: %v", err))
	case m.Op == "error":
		return fail(errors.New(m.Error))
	case m.Op != "ready":
		return fail(fmt.Errorf("the container stage said %q", m.Op))
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fail(fmt.Errorf("opening a pidfd: %w", err))
	}
	fds := []int{pidfd}
	if masterFD >= 0 {
		fds = append(fds, masterFD)
	}
	return pid, fds, nil
}

// drop forgets p after a failure: at once if it was reaped, else when it
// is.
func (s *server) drop(p *sproc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.failed = true
	if p.ctl != nil {
		p.ctl.Close()
		p.ctl = nil
	}
	if p.exit != nil && s.procs[p.name] == p {
		delete(s.procs, p.name)
	}
}

// start lets the created process name execute its command, and reports
// whether it did. It returns the process's "exited" when the process has
// already ended and been reaped meanwhile.
func (s *server) start(name string) (*message, error) {
	s.mu.Lock()
	p := s.procs[name]
	if p == nil || p.ctl == nil || p.failed {
		s.mu.Unlock()
		return nil, fmt.Errorf("no created process %q", name)
	}
	ctl := p.ctl
	s.mu.Unlock()
	if err := ctl.SetDeadline(time.Now().Add(stageTimeout)); err != nil {
		s.drop(p)
		return nil, err
	}
	if err := writeFrame(ctl, &message{Op: "go"}, nil); err != nil {
		s.drop(p)
		return nil, fmt.Errorf("starting the command: %w", err)
	}
	m, _, err := readFrame(ctl)
	switch {
	case err == nil && m.Op == "error":
		s.drop(p)
		return nil, errors.New(m.Error)
	case err != nil && !errors.Is(err, io.EOF):
		_ = unix.Kill(p.pid, unix.SIGKILL)
		s.drop(p)
		return nil, fmt.Errorf("starting the command: %w", err)
	}
	// End of file: the stage's end was closed by its execve.
	s.mu.Lock()
	defer s.mu.Unlock()
	ctl.Close()
	p.ctl, p.started = nil, true
	if p.exit != nil && !p.announced {
		p.announced = true
		return &message{Op: opExited, Name: p.name, Exit: p.exit}, nil
	}
	return nil, nil
}

// reapAll reaps every child that has ended. For a process of the init's,
// it first kills what is left of its process group (its PID still names
// the group while it is a zombie), then records its exit and tells the
// agent.
func (s *server) reapAll() {
	var events []*message
	s.mu.Lock()
	for {
		pid := exitedChild()
		if pid <= 0 {
			break
		}
		p := s.byPID[pid]
		if p != nil {
			_ = unix.Kill(-pid, unix.SIGKILL)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != nil {
			break
		}
		if p == nil {
			continue // an orphan the pod's processes left
		}
		delete(s.byPID, pid)
		st := exitStatus(ws)
		p.exit = &st
		switch {
		case p.failed:
			delete(s.procs, p.name)
		case p.started && !p.announced:
			p.announced = true
			events = append(events, &message{Op: opExited, Name: p.name, Exit: p.exit})
		}
	}
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		return
	}
	for _, ev := range events {
		if s.write(c, ev, nil) != nil {
			return
		}
	}
}

// exitedChild returns the PID of a child that has ended and is not
// reaped yet, without reaping it; 0 when there is none.
func exitedChild() int {
	const (
		pAll    = 0
		wEXITED = 0x4
		wNOHANG = 0x1
		wNOWAIT = 0x1000000
	)
	var info [128]byte // siginfo_t; si_pid is at offset 16 on 64-bit Linux
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info[0])), wEXITED|wNOHANG|wNOWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return 0
		}
		return int(*(*int32)(unsafe.Pointer(&info[16])))
	}
}

// fileConn makes a connected unix socket descriptor a *net.UnixConn
// (taking the descriptor over).
func fileConn(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "socket")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}
