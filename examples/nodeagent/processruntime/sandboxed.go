package processruntime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/cgroupfs"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// This file runs container processes in their pod's sandbox: through the
// sandbox's init, which starts each in the container's view and identity,
// reaps it and reports its exit.

// procName names a container instance's process in its sandbox.
func procName(container string, instance int) string {
	return container + "." + strconv.Itoa(instance)
}

// processSpec is what the container stage runs for spec: the container's
// command, environment and working directory (default: the pod's scratch
// directory, at ScratchPath), its identity and view.
func (r *Runtime) processSpec(p *podState, pod *v1.Pod, spec *v1.Container) (*sandbox.ProcessSpec, *reasonMessage) {
	sec := effectiveSecurity(pod, spec)
	uid, gid, groups, waiting := r.identity(pod, spec, sec)
	if waiting != nil {
		return nil, waiting
	}
	l, waiting := r.launchOf(pod, spec)
	if waiting != nil {
		return nil, waiting
	}
	env := l.env
	ps := &sandbox.ProcessSpec{
		Args:            l.argv,
		Env:             env,
		Dir:             l.dir,
		UID:             uid,
		GID:             gid,
		Groups:          groups,
		Capabilities:    sec.capabilities(),
		AllCapabilities: sec.privileged,
		NoNewPrivileges: sec.noNewPrivileges,
		ReadOnlyRoot:    sec.readOnlyRoot,
		UnmaskedProc:    sec.unmaskedProc,
	}
	if ps.Dir == "" {
		ps.Dir = ScratchPath
	}
	if sec.seccomp != nil && sec.seccomp.Type == v1.SeccompProfileTypeRuntimeDefault && !sec.privileged {
		ps.Seccomp = sandbox.SeccompRuntimeDefault
	}
	vars := envMap(env)
	for _, m := range spec.VolumeMounts {
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expandVars(m.SubPathExpr, vars)
		}
		// As a kubelet mounts them: the content of configMap, secret,
		// downwardAPI and projected volumes is the node's, read-only.
		ro := m.ReadOnly || readOnlyVolume(pod, m.Name)
		ps.Mounts = append(ps.Mounts, sandbox.Mount{Volume: m.Name, SubPath: sub, Target: filepath.Clean(m.MountPath), ReadOnly: ro,
			RecursiveReadOnly: m.ReadOnly && m.RecursiveReadOnly != nil && *m.RecursiveReadOnly != v1.RecursiveReadOnlyDisabled})
	}
	return ps, nil
}

// startSandboxed starts the container's instance in the pod's sandbox:
// its log shim, the container stage (created, waiting before its
// execve), the stage put in the container's cgroup, then its command.
func (r *Runtime) startSandboxed(p *podState, pod *v1.Pod, spec *v1.Container, instance int) (*proc, error) {
	r.mu.Lock()
	sb := p.sb
	r.mu.Unlock()
	if sb == nil || sb.ended() {
		return nil, errSandboxEnded
	}
	ps, waiting := r.processSpec(p, pod, spec)
	if waiting != nil {
		return nil, errors.New(waiting.Message)
	}
	name := procName(spec.Name, instance)
	if err := r.aimEphemeral(p, pod, spec.Name, ps); err != nil {
		return nil, err
	}
	logDir := containerLogDir(p.dir, spec.Name)
	mode := shimMode(spec)
	// Its log shim holds its output pipes (and stdin), started first; or,
	// with a terminal, the terminal the init opens, once it has.
	var shim *logShim
	stdio := sandbox.Stdio{TTY: mode.TTY}
	if !mode.TTY {
		t0 := time.Now()
		cio, sh, err := r.startLogShim(logDir, instance, mode, nil)
		traceStage("logshim", t0)
		if err != nil {
			return nil, err
		}
		defer cio.close()
		shim, stdio.Stdout, stdio.Stderr, stdio.Stdin = sh, cio.stdout, cio.stderr, cio.stdin
	}
	// Not SyncPod's ctx: a termination requested while the container
	// starts must not leave it half-started (reported StartError and
	// killed without its grace period). The start completes, SyncPod
	// returns, and SyncTerminatingPod stops the container as it stops any.
	cctx, cancel := context.WithTimeout(r.closingCtx, sandboxWait)
	defer cancel()
	t0 := time.Now()
	sp, err := sb.conn.Create(cctx, name, ps, stdio)
	traceStage("create", t0)
	if err != nil {
		if cctx.Err() != nil {
			r.abandon(sb, name)
		}
		return nil, err
	}
	if mode.TTY {
		_, shim, err = r.startLogShim(logDir, instance, mode, sp.Terminal)
		sp.Terminal.Close()
		if err != nil {
			r.abandon(sb, name)
			return nil, err
		}
	}
	cgroup := ""
	if r.cgroups != nil {
		if cgroup, err = r.cgroups.newContainerCgroup(p.uid, spec.Name); err == nil {
			err = cgroupfs.Write(filepath.Join(cgroup, "cgroup.procs"), strconv.Itoa(sp.HostPID))
		}
		if err != nil {
			r.abandon(sb, name)
			return nil, fmt.Errorf("putting the process in the container's cgroup: %w", err)
		}
	}
	st, err := readStat(sp.HostPID)
	if err != nil {
		r.abandon(sb, name)
		return nil, fmt.Errorf("reading the process's start time: %w", err)
	}
	t0 = time.Now()
	err = sb.conn.Start(cctx, name)
	traceStage("start", t0)
	if err != nil {
		if cctx.Err() != nil {
			r.abandon(sb, name)
		}
		return nil, err
	}
	pr := &proc{pid: sp.HostPID, pgid: sp.HostPID, startTicks: st.startTicks, cgroup: cgroup, startedAt: r.clock.Now(), shim: shim, done: make(chan struct{}), sb: sb, name: name}
	pr.id = containerID(pr.pid, pr.startTicks)
	return pr, nil
}

// abandon kills a process whose start failed half-way.
func (r *Runtime) abandon(sb *podSandbox, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), sandboxWait)
	defer cancel()
	_ = sb.conn.Signal(ctx, name, syscall.SIGKILL)
}

// reapSandboxed waits for the exit of a sandboxed container's process, as
// its sandbox's init reports it (after killing what was left in its
// process group), kills what it left in its cgroup, waits for its log to
// be complete and records the exit. When the sandbox ends first, the exit
// is recorded as a kill; when the runtime closes first, it returns (a later
// runtime adopts the process).
//
// It runs as a watcher (goWatcher).
func (r *Runtime) reapSandboxed(p *podState, c *container, pr *proc) {
	st, err := pr.sb.conn.Wait(r.closingCtx, pr.name)
	exit := ExitStatus{Code: 137, Signal: int32(syscall.SIGKILL), Reason: ReasonError, Message: errSandboxEnded.Error()}
	if err != nil {
		select {
		case <-pr.sb.gone:
		case <-r.closing:
			return
		}
	} else {
		exit = exitOf(st.Code, st.Signal)
	}
	pr.mu.Lock()
	r.killContainerLeftovers(p.uid, c.rec.Name, pr.cgroup)
	pr.reaped = true
	pr.mu.Unlock()
	r.awaitLogShim(pr.shim)
	exit.StartedAt, exit.FinishedAt, exit.ID = pr.startedAt, r.clock.Now(), pr.id
	r.exited(p, c, pr, exit)
	if err == nil {
		ctx, cancel := context.WithTimeout(r.closingCtx, sandboxWait)
		_ = pr.sb.conn.Forget(ctx, pr.name)
		cancel()
	}
}

// signalSandboxed has the sandbox's init signal a container's process
// group, or, when the init cannot be reached, kills the process itself if
// sig is SIGKILL (the rest of the pod goes with the sandbox).
func (r *Runtime) signalSandboxed(pr *proc, sig syscall.Signal) {
	ctx, cancel := context.WithTimeout(r.closingCtx, sandboxWait)
	defer cancel()
	err := pr.sb.conn.Signal(ctx, pr.name, sig)
	if err == nil {
		return
	}
	if sig == syscall.SIGKILL {
		killIfSame(pr.pid, pr.startTicks)
	}
	r.log.V(2).Info("Cannot have the sandbox signal a container", "pid", pr.pid, "err", err.Error())
}

// exitOf is the exit of a process that ended with code, or of signal sig.
func exitOf(code, sig int) ExitStatus {
	switch {
	case sig != 0:
		return ExitStatus{Code: int32(128 + sig), Signal: int32(sig), Reason: ReasonError, Message: "killed by signal: " + syscall.Signal(sig).String()}
	case code == 0:
		return ExitStatus{Code: 0, Reason: ReasonCompleted}
	}
	return ExitStatus{Code: int32(code), Reason: ReasonError}
}

// envMap returns the variables of env ("K=V" entries, the last one wins).
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	return m
}

// expandVars expands $(VAR) in s from vars as the kubelet expands
// subPathExpr: $$ is a literal $, and a reference to an unknown variable
// stays as written.
func expandVars(s string, vars map[string]string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			out = append(out, s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			out = append(out, '$')
			i++
		case '(':
			end := -1
			for j := i + 2; j < len(s); j++ {
				if s[j] == ')' {
					end = j
					break
				}
			}
			if end < 0 {
				out = append(out, s[i])
				continue
			}
			name := s[i+2 : end]
			if v, ok := vars[name]; ok {
				out = append(out, v...)
			} else {
				out = append(out, s[i:end+1]...)
			}
			i = end
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}

// readOnlyVolume reports whether pod's volume name is one a kubelet
// mounts read-only whatever the mount says.
func readOnlyVolume(pod *v1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name {
			return v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
		}
	}
	return false
}
