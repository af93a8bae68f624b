package processruntime

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"k8s.io/utils/clock"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/logshim"
)

// This file starts, waits for and stops the log shims: one process per
// container instance that drains the container's stdout and stderr into
// its log files (see the internal logshim package). A shim is the agent's
// own executable run again, so it needs no other file on the node; it is
// not a process of the pod (it does not carry the PODKIT_* variables), and
// it outlives the agent as the container does.

// shimExecutable is what a shim runs by default: the running program
// itself (Options.StageExecutable replaces it).
const shimExecutable = "/proc/self/exe"

// logShim is the log shim of one container instance.
type logShim struct {
	dir      string
	instance int
	// exited is closed once the shim has ended and been reaped; nil for
	// the shim of an adopted process, which this runtime did not start.
	exited chan struct{}
}

// containerLogDir is the directory of a container's log files.
func containerLogDir(podDir, container string) string {
	return filepath.Join(podDir, logsDir, container)
}

// startLogShim starts the shim of the container's instance, holding
// what mode says of the container: with mode.TTY, terminal, the master of
// the container's terminal (the caller keeps the slave and closes its
// master after); else the read ends of new stdout and stderr pipes, and
// with mode.Stdin the write end of a stdin pipe. It returns the process's
// ends of the pipes, which the caller gives the container and then closes
// (none with a terminal). The shim serves attach sessions on its socket
// (logshim.AttachSocketName) from the start.
func (r *Runtime) startLogShim(dir string, instance int, mode logshim.Mode, terminal *os.File) (cio containerIO, sh *logShim, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return containerIO{}, nil, fmt.Errorf("creating the log directory: %w", err)
	}
	if mode.TTY != (terminal != nil) {
		return containerIO{}, nil, errors.New("a container's terminal needs its master, and only it")
	}
	lock, err := logshim.CreateLock(dir, instance)
	if err != nil {
		return containerIO{}, nil, fmt.Errorf("locking the log: %w", err)
	}
	defer lock.Close()
	listener, err := logshim.ListenAttach(dir, instance)
	if err != nil {
		_ = os.Remove(lock.Name())
		return containerIO{}, nil, err
	}
	defer listener.Close()
	// shimEnds are given to the shim (closed here once it has them); the
	// process's ends go into cio.
	var shimEnds []*os.File
	fail := func(err error) (containerIO, *logShim, error) {
		for _, f := range shimEnds {
			f.Close()
		}
		cio.close()
		_ = os.Remove(lock.Name())
		_ = os.Remove(filepath.Join(dir, logshim.AttachSocketName(instance)))
		return containerIO{}, nil, err
	}
	// The shim's descriptors 3 to 7 (see the logshim package).
	extra := make([]*os.File, 5)
	extra[2], extra[3] = lock, listener
	pipe := func(shimReads bool) (*os.File, error) {
		rd, wr, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("creating a pipe for the container: %w", err)
		}
		if shimReads {
			shimEnds = append(shimEnds, rd)
			return wr, nil
		}
		shimEnds = append(shimEnds, wr)
		return rd, nil
	}
	if mode.TTY {
		extra[0] = terminal
	} else {
		if cio.stdout, err = pipe(true); err != nil {
			return fail(err)
		}
		if cio.stderr, err = pipe(true); err != nil {
			return fail(err)
		}
		extra[0], extra[1] = shimEnds[0], shimEnds[1]
		if mode.Stdin {
			if cio.stdin, err = pipe(false); err != nil {
				return fail(err)
			}
			extra[4] = shimEnds[2]
		}
	}
	exe := shimExecutable
	if r.stageExe != "" {
		exe = r.stageExe
	}
	cmd := &exec.Cmd{
		Path: exe,
		Args: append([]string{"podkit-log-shim"}, logshim.Args(dir, instance, r.logMaxSize, r.logMaxFiles, mode)...),
		// GORACE matters only when the program was built with -race (a
		// test binary): the race runtime would sleep a second at exit.
		// One P: the shim copies and waits, and each further P costs its
		// start threads, stacks and their page faults.
		Env:        []string{logshim.MarkerEnv + "=1", "GORACE=atexit_sleep_ms=0", "GOMAXPROCS=1"},
		Dir:        "/",
		ExtraFiles: extra,
		// A group of its own: signals for the agent's group (a terminal's
		// Ctrl-C) or the container's do not reach it.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("starting the log shim: %w", err))
	}
	for _, f := range shimEnds {
		f.Close()
	}
	// Record who holds the lock, so a stuck shim can be killed by a later
	// run of the agent too.
	if st, err := readStat(cmd.Process.Pid); err == nil {
		_, _ = lock.WriteAt([]byte(strconv.Itoa(cmd.Process.Pid)+" "+strconv.FormatUint(st.startTicks, 10)+"\n"), 0)
	}
	sh = &logShim{dir: dir, instance: instance, exited: make(chan struct{})}
	go func() {
		awaitExit(cmd.Process.Pid) // holds no thread for the container's life
		_ = cmd.Wait()
		close(sh.exited)
	}()
	return cio, sh, nil
}

// awaitLogShim waits, once the instance's processes have ended, until its
// shim has written everything and ended, so that a container's exit is
// recorded only once its log is complete. It gives up after KillTimeout
// (a process that escaped the container's group may still hold its
// stdout) or when the runtime closes.
func (r *Runtime) awaitLogShim(sh *logShim) {
	if sh == nil {
		return
	}
	deadline := r.clock.NewTimer(r.killTimeout)
	defer deadline.Stop()
	if sh.exited != nil {
		select {
		case <-sh.exited:
		case <-deadline.C():
			r.log.Info("A container's log shim still runs after the container ended; something outside the container holds its output", "dir", sh.dir, "instance", sh.instance)
		}
		return
	}
	var tick clock.Ticker
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for !shimGone(sh) {
		if tick == nil {
			tick = r.clock.NewTicker(r.poll)
		}
		select {
		case <-tick.C():
		case <-deadline.C():
			return
		case <-r.closing:
			return
		}
	}
}

// stopLogShims waits until no log shim of the pod runs, as the last step
// of stopping it: every process of the pod has ended by then, so each shim
// reaches end of file and ends by itself. A shim still running after
// KillTimeout (held open by a process outside the pod) is killed.
func (r *Runtime) stopLogShims(podDir string) error {
	var running []*logShim
	entries, err := os.ReadDir(filepath.Join(podDir, logsDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("listing the log directories: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(podDir, logsDir, e.Name())
		locks, _ := logshim.Locks(dir)
		for _, i := range locks {
			if sh := (&logShim{dir: dir, instance: i}); !shimGone(sh) {
				running = append(running, sh)
			}
		}
	}
	if len(running) == 0 {
		return nil
	}
	tick := r.clock.NewTicker(r.poll)
	defer tick.Stop()
	deadline := r.clock.NewTimer(r.killTimeout)
	defer func() { deadline.Stop() }()
	killed := false
	for {
		left := running[:0]
		for _, sh := range running {
			if !shimGone(sh) {
				left = append(left, sh)
			}
		}
		running = left
		if len(running) == 0 {
			return nil
		}
		select {
		case <-tick.C():
		case <-r.closing:
			return ErrClosed
		case <-deadline.C():
			if killed {
				return fmt.Errorf("the log shim of %s still runs %v after SIGKILL", running[0].dir, r.killTimeout)
			}
			killed = true
			for _, sh := range running {
				r.killLogShim(sh)
			}
			deadline = r.clock.NewTimer(r.killTimeout)
		}
	}
}

// shimGone reports whether the shim of the instance has ended: it
// released its lock, and its process, which releases the lock as it exits,
// is no longer in the process table (or a zombie).
func shimGone(sh *logShim) bool {
	if logshim.Running(sh.dir, sh.instance) {
		return false
	}
	pid, start, err := logshim.Holder(sh.dir, sh.instance)
	return err != nil || !sameProcess(pid, start)
}

// killLogShim SIGKILLs the shim holding the instance's lock, checking
// first that the recorded process is still the shim.
func (r *Runtime) killLogShim(sh *logShim) {
	pid, start, err := logshim.Holder(sh.dir, sh.instance)
	if err != nil {
		r.log.Error(err, "Cannot find a stuck log shim to kill it", "dir", sh.dir)
		return
	}
	if !sameProcess(pid, start) {
		return
	}
	r.log.Info("Killing a log shim still running after its pod stopped; something outside the pod holds the container's output", "dir", sh.dir, "instance", sh.instance, "pid", pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		r.log.Error(err, "Cannot kill a stuck log shim", "pid", pid)
	}
}
