package processruntime

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/pty"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// startProcess starts the process of container spec of pod p, as the
// container's instance (its restart count), with the log shim of that
// instance holding its stdout and stderr. It returns the running process
// and its Cmd (to reap it). The error says why nothing was started.
func (r *Runtime) startProcess(p *podState, pod *v1.Pod, spec *v1.Container, instance int) (*proc, *exec.Cmd, error) {
	if spec == nil {
		return nil, nil, errors.New("the container is not in the pod's spec")
	}
	l, waiting := r.launchOf(pod, spec)
	if waiting != nil {
		return nil, nil, errors.New(waiting.Message)
	}
	env, path, dir, argv := l.env, l.path, l.dir, l.argv
	if dir == "" {
		dir = filepath.Join(p.dir, scratchDir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, nil, fmt.Errorf("working directory %q does not exist or is not a directory", dir)
	}
	exe, err := lookPath(argv[0], path, dir)
	if err != nil {
		return nil, nil, err
	}
	mode := shimMode(spec)
	var master, slave *os.File
	if mode.TTY {
		if master, slave, err = pty.Open("/dev/ptmx"); err != nil {
			return nil, nil, err
		}
	}
	cio, shim, err := r.startLogShim(containerLogDir(p.dir, spec.Name), instance, mode, master)
	if master != nil {
		// The shim holds it now.
		master.Close()
	}
	if err != nil {
		if slave != nil {
			slave.Close()
		}
		return nil, nil, err
	}
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        argv,
		Env:         env,
		Dir:         dir,
		Stdout:      cio.stdout,
		Stderr:      cio.stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if cio.stdin != nil {
		cmd.Stdin = cio.stdin
	}
	if slave != nil {
		// Its terminal, as its controlling terminal: a session of its own,
		// whose leader it is (so its process group is its PID, as without).
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	var cgroup string
	placed, err := r.limits.startBorn(p.uid, func() (err error) {
		cgroup, err = r.startContained(cmd, p.uid, spec.Name)
		return err
	})
	// The container holds its ends now (or nothing does, and the shim
	// ends at once).
	cio.close()
	if slave != nil {
		slave.Close()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("starting %q: %w", exe, err)
	}
	pid := cmd.Process.Pid
	// Its limits, where they are cgroup v1's and it was not born in them
	// (just after it started: what it did in that instant is not limited).
	if !placed {
		if err := r.limits.place(p.uid, pid); err != nil {
			r.log.Error(err, "Cannot put a container process in its pod's cgroups; its pod's limits do not apply to it", "pod", p.uid, "pid", pid)
		}
	}
	// The child is not reaped before reap runs, so its stat is readable
	// even if it has already exited.
	st, err := readStat(pid)
	if err != nil {
		r.log.Error(err, "Cannot read a new process's start time; it will not be recognised after an agent restart", "pid", pid)
	}
	pr := &proc{pid: pid, pgid: pid, startTicks: st.startTicks, cgroup: cgroup, startedAt: r.clock.Now(), shim: shim, done: make(chan struct{})}
	pr.id = containerID(pid, pr.startTicks)
	return pr, cmd, nil
}

// environment builds a container's environment, in the order the later
// entry wins: PATH, HOSTNAME, HOME, the container's env, the PODKIT_*
// variables (EnvPodUID and the others). It also returns the PATH commands are looked up in.
func (r *Runtime) environment(pod *v1.Pod, spec *v1.Container) (env []string, path string) {
	path = r.path
	if r.sandboxes != nil && !r.pathGiven && !noUserNamespace(pod) {
		// A sandboxed pod's user could not search the agent's own
		// directories of its PATH (/root/...): it gets an image's PATH.
		path = DefaultPath
	}
	env = []string{"HOSTNAME=" + podHostname(pod), "HOME=/"}
	for _, e := range spec.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v, _ = fieldRefValue(pod, e.ValueFrom.FieldRef.FieldPath)
		}
		if e.Name == "PATH" {
			path = v
		}
		env = append(env, e.Name+"="+v)
	}
	env = append([]string{"PATH=" + path}, env...)
	env = append(env,
		EnvPodUID+"="+string(pod.UID),
		EnvPodName+"="+pod.Name,
		EnvPodNamespace+"="+pod.Namespace,
		EnvContainerName+"="+spec.Name,
		EnvRuntimeID+"="+r.id,
	)
	return env, path
}

// LookPath finds the executable a container command runs when the
// container's env sets no PATH: name itself when it holds a slash, else the
// first match in the runtime's PATH (Options.Path). The error names the
// command and the PATH searched. An agent can use it to check up front
// that the commands it means to run exist (a sandboxed pod looks its
// command up in its own view, which shows the host's programs the same).
func (r *Runtime) LookPath(name string) (string, error) { return sandbox.LookPath(name, r.path, "/") }

func lookPath(name, path, dir string) (string, error) { return sandbox.LookPath(name, path, dir) }

// exitStatus turns a reaped process's state into an ExitStatus (without
// times).
func exitStatus(waitErr error, ps *os.ProcessState) ExitStatus {
	if ps == nil {
		return ExitStatus{Code: 137, Reason: ReasonStatusUnknown, Message: fmt.Sprintf("cannot wait for the process: %v", waitErr)}
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		sig := ws.Signal()
		return ExitStatus{Code: 128 + int32(sig), Signal: int32(sig), Reason: ReasonError, Message: "killed by signal: " + sig.String()}
	case ps.ExitCode() == 0:
		return ExitStatus{Code: 0, Reason: ReasonCompleted}
	}
	return ExitStatus{Code: int32(ps.ExitCode()), Reason: ReasonError}
}
