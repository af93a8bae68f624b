package processruntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/internal/mountinfo"
	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/containerhook"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/probe"
	"github.com/podkit/podkit/lifecycle/volume"
)

// This file is the runtime's side of the per-pod features an agent's
// assembly builds (lifecycle.PodFeatures): probes, container lifecycle
// hooks, the active deadline, containers' environments and volumes. The
// features keep their own state by UID; the hooks call them at the
// kubelet's points (see "Per-pod features" in the package doc).

// UsePodFeatures makes the runtime's hooks use f, the per-pod features
// an agent's assembly built (lifecycle.Agent.Features, built with the
// Runtime as their ExecRunner): SyncPod checks the active deadline, sets
// the pod's volumes up, builds each container's environment, runs
// postStart hooks, kills containers whose liveness or startup probe
// failed and reports what the probes say of readiness;
// SyncTerminatingPod runs preStop hooks within the grace period;
// SyncTerminatedPod forgets the pod. Without them (nil, the default), the
// runtime refuses the pods that ask for any of these (ValidatePod), but
// for volumes, which it mounts empty with a warning.
//
// Call it once, before the pod workers run (before lifecycle.Agent.Run);
// it is safe for concurrent use with the hooks all the same.
func (r *Runtime) UsePodFeatures(f *lifecycle.PodFeatures) { r.features.Store(f) }

// podFeatures returns the features UsePodFeatures gave, or nil.
func (r *Runtime) podFeatures() *lifecycle.PodFeatures { return r.features.Load() }

// VolumeRoot is a directory inside the state directory that the runtime
// never touches, for the agent's volume manager (lifecycle
// PodFeatureOptions.VolumeRoot): being inside the state directory, it is
// hidden from every pod, as the volumes of other pods must be.
func (r *Runtime) VolumeRoot() string { return r.volumeRoot }

// maxExecOutput bounds what ExecInContainer keeps of a command's output:
// what a probe's event shows (the probe manager keeps the same).
const maxExecOutput = 10 << 10

// ExecInContainer runs cmd in the container whose current run is
// containerID (the ContainerStatus.ID the runtime reports), as Exec does,
// and returns its combined stdout and stderr (the first 10 KiB) and its
// exit code: the probe manager's and the hook runner's ExecRunner
// (lifecycle/probe, lifecycle/containerhook). It runs in a container of a
// pod being terminated too (preStop hooks). timeout is not used: ctx ends
// at it, and the command's process group is then killed.
//
// The error is for a command that could not run: no such run (it ended,
// or never was), the command cannot start; or ctx's error. Called from the
// features' goroutines, concurrently.
func (r *Runtime) ExecInContainer(ctx context.Context, containerID string, cmd []string, _ time.Duration) ([]byte, int, error) {
	if len(cmd) == 0 || cmd[0] == "" {
		return nil, 0, errors.New("processruntime: exec: no command")
	}
	if r.closed() {
		return nil, 0, ErrClosed
	}
	rc, name, err := r.findRun(containerID)
	if err != nil {
		return nil, 0, fmt.Errorf("processruntime: exec: %w", err)
	}
	out := &cappedOutput{max: maxExecOutput}
	code, err := r.execIn(ctx, rc, name, cmd, Streams{Stdout: out, Stderr: out})
	return out.bytes(), code, err
}

var _ probe.ExecRunner = (*Runtime)(nil)

// findRun returns the running container whose current run is id, and its
// name, whether its pod terminates or not.
func (r *Runtime) findRun(id string) (runningContainer, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pods {
		for name, c := range p.containers {
			if c.proc == nil || c.proc.id != id {
				continue
			}
			rc := runningContainer{p: p, c: c, proc: c.proc, pod: p.spec}
			if p.spec != nil {
				rc.spec = findContainer(p.spec, name)
			}
			return rc, name, nil
		}
	}
	return runningContainer{}, "", fmt.Errorf("%w: no running container %q", ErrNotRunning, id)
}

// cappedOutput keeps the first max bytes written to it and drops the
// rest, from any goroutine (stdout's and stderr's copies), so a command's
// output cannot grow the agent.
type cappedOutput struct {
	max int
	mu  sync.Mutex
	buf []byte
}

func (o *cappedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if room := o.max - len(o.buf); room > 0 {
		o.buf = append(o.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (o *cappedOutput) bytes() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]byte(nil), o.buf...)
}

// validateFeatures refuses what the runtime cannot honour of pod with the
// features it has: without features, probes, lifecycle hooks and
// activeDeadlineSeconds; with them, probes that cannot run
// (probe.Validate), volumes the volume manager does not prepare, and
// network probes and hooks of a pod the agent cannot reach (a network
// namespace of its own with no pod network).
func (r *Runtime) validateFeatures(pod *v1.Pod, refuse func(reason, format string, args ...any) error) error {
	f := r.podFeatures()
	if f == nil {
		if asks := featuresAskedFor(pod); len(asks) > 0 {
			return refuse(ReasonUnsupportedPod, "asks for %s, which this runtime was given no way to honour (no per-pod features: Runtime.UsePodFeatures)", strings.Join(asks, ", "))
		}
		return nil
	}
	if err := probe.Validate(pod); err != nil {
		return refuse(ReasonUnsupportedPod, "%v", err)
	}
	if f.Volumes != nil {
		if err := volume.Unsupported(pod); err != nil {
			var ue *volume.UnsupportedError
			if errors.As(err, &ue) {
				err = ue.Without(volume.TypeHostPath)
			}
			if err != nil {
				return refuse(volume.ReasonUnsupportedVolume, "%v", err)
			}
		}
	}
	if r.sandboxes != nil && r.network == nil && !pod.Spec.HostNetwork {
		if uses := networkActions(pod); len(uses) > 0 {
			return refuse(ReasonUnsupportedPod, "has %s, which the agent cannot reach: this node gives pods a network namespace with a loopback only (no pod network)", strings.Join(uses, ", "))
		}
	}
	return nil
}

// featuresAskedFor lists the fields of pod only the per-pod features
// honour.
func featuresAskedFor(pod *v1.Pod) []string {
	var out []string
	if pod.Spec.ActiveDeadlineSeconds != nil {
		out = append(out, "activeDeadlineSeconds")
	}
	for _, c := range allContainers(pod) {
		for _, p := range []struct {
			name  string
			probe *v1.Probe
		}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
			if p.probe != nil {
				out = append(out, fmt.Sprintf("a %s (container %q)", p.name, c.Name))
			}
		}
		if c.Lifecycle != nil && (c.Lifecycle.PostStart != nil || c.Lifecycle.PreStop != nil) {
			out = append(out, fmt.Sprintf("lifecycle hooks (container %q)", c.Name))
		}
	}
	return out
}

// networkActions lists the probes and hooks of pod that connect to it
// over the network.
func networkActions(pod *v1.Pod) []string {
	var out []string
	network := func(h *v1.ProbeHandler) bool {
		return h != nil && (h.HTTPGet != nil || h.TCPSocket != nil || h.GRPC != nil)
	}
	for _, c := range allContainers(pod) {
		for _, p := range []struct {
			name  string
			probe *v1.Probe
		}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
			if p.probe != nil && network(&p.probe.ProbeHandler) {
				out = append(out, fmt.Sprintf("a network %s (container %q)", p.name, c.Name))
			}
		}
		if l := c.Lifecycle; l != nil {
			for name, h := range map[string]*v1.LifecycleHandler{"postStart": l.PostStart, "preStop": l.PreStop} {
				if h != nil && h.HTTPGet != nil {
					out = append(out, fmt.Sprintf("an httpGet %s hook (container %q)", name, c.Name))
				}
			}
		}
	}
	return out
}

// beforeStarts is SyncPod's first use of the features, before it starts
// anything: the active deadline (past it, the pod is terminal and ends
// Failed, DeadlineExceeded) and the pod's volumes (set up, or brought up
// to date, at every sync; on an error nothing starts and the engine
// retries, as the kubelet's pod waits in ContainerCreating).
func (r *Runtime) beforeStarts(ctx context.Context, p *podState, pod *v1.Pod) (terminal bool, err error) {
	f := r.podFeatures()
	if f == nil {
		return false, nil
	}
	r.mu.Lock()
	started := metav1.NewTime(p.startedAt)
	r.mu.Unlock()
	past, err := f.Deadline.Check(pod, &started)
	if err != nil {
		return false, fmt.Errorf("processruntime: pod %s: %w", podName(pod), err)
	}
	if past {
		r.mu.Lock()
		p.deadlineExceeded = true
		r.mu.Unlock()
		return true, nil
	}
	if f.Volumes != nil {
		if err := f.Volumes.SetUp(ctx, pod); err != nil {
			return false, fmt.Errorf("processruntime: pod %s: %w", podName(pod), err)
		}
	}
	return false, nil
}

// reportProbes hands the probe manager the status of the pod as the
// runtime sees it now, so it probes what runs (a new run of a container
// starts unready) and stops probing a pod being stopped. A pod that has
// no address of its own is probed on the node's loopback.
func (r *Runtime) reportProbes(p *podState, pod *v1.Pod) {
	f := r.podFeatures()
	if f == nil {
		return
	}
	r.mu.Lock()
	s := r.snapshotLocked(p)
	r.mu.Unlock()
	st := APIStatus(pod, s)
	if st.PodIP == "" {
		st.PodIP = "127.0.0.1"
	}
	if err := f.Probes.UpdatePodStatus(pod, &st); err != nil {
		r.emitWarning(p, "", reasonMessage{probe.ReasonUnhealthy, err.Error()})
	}
}

// probedLocked sets cs's Started and Ready from the probes, for a running
// container of p's spec.
func (r *Runtime) probedLocked(f *lifecycle.PodFeatures, p *podState, cs *ContainerStatus) {
	if f == nil || p.spec == nil || cs.State != ContainerStateRunning {
		return
	}
	started := f.Probes.IsStarted(p.spec, cs.Name, cs.ID)
	ready := started && !p.terminating && f.Probes.IsReady(p.spec, cs.Name, cs.ID)
	cs.Started, cs.Ready = &started, &ready
}

// hookContainer names container name's current run for a hook.
func (r *Runtime) hookContainer(p *podState, pod *v1.Pod, name, id string) containerhook.Container {
	host := "127.0.0.1"
	r.mu.Lock()
	if p.sb != nil && len(p.sb.rec.IPs) > 0 {
		host = p.sb.rec.IPs[0]
	}
	r.mu.Unlock()
	return containerhook.Container{Pod: pod, Name: name, ID: id, Host: host}
}

// killUnhealthy kills, one goroutine each, the running containers of pod
// whose liveness or startup probe failed (their preStop hook within the
// grace period the probe names), and returns once they have exited: the
// caller then starts them again as their restart policy says.
func (r *Runtime) killUnhealthy(ctx context.Context, p *podState, pod *v1.Pod) {
	f := r.podFeatures()
	if f == nil {
		return
	}
	type kill struct {
		c       *container
		pr      *proc
		restart probe.Restart
	}
	var kills []kill
	r.mu.Lock()
	for _, c := range p.containers {
		if c.proc == nil || c.rec.Ephemeral {
			continue
		}
		if rs, ok := f.Probes.ShouldRestart(pod, c.rec.Name, c.proc.id); ok {
			kills = append(kills, kill{c, c.proc, rs})
		}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range kills {
		msg := k.restart.Message
		if podstatus.ShouldRestart(pod.Spec.RestartPolicy, k.c.rec.Init, 1) {
			msg += ", will be restarted"
		}
		wg.Go(func() { r.killContainer(ctx, p, pod, k.c, k.pr, k.restart.GracePeriodSeconds, msg) })
	}
	wg.Wait()
}

// killContainer stops one running container of a pod that goes on: a
// ContainerKilling event saying why, its preStop hook within grace
// seconds, then SIGTERM and what is left of the grace period (at least
// containerhook.MinimumGracePeriodSeconds), then SIGKILL. It returns once
// the process has exited (its exit recorded), or ctx ended.
func (r *Runtime) killContainer(ctx context.Context, p *podState, pod *v1.Pod, c *container, pr *proc, grace int64, why string) {
	r.mu.Lock()
	ev := r.eventLocked(ContainerKilling, p, c.rec.Name)
	r.mu.Unlock()
	ev.Message = why
	r.emit(ev)
	r.log.Info("Killing a container", "pod", podName(pod), "container", c.rec.Name, "why", why, "gracePeriod", grace)
	left := grace
	if f := r.podFeatures(); f != nil {
		left, _ = f.Hooks.PreStop(ctx, r.hookContainer(p, pod, c.rec.Name, pr.id), grace)
	}
	left = max(left, containerhook.MinimumGracePeriodSeconds)
	if err := r.stop(ctx, []*proc{pr}, time.Duration(left)*time.Second); err != nil {
		r.log.Error(err, "Cannot kill a container", "pod", podName(pod), "container", c.rec.Name)
	}
}

// postStart runs c's postStart hook, if it has one, right after SyncPod
// started it; a failed hook kills the container (its preStop hook
// running as for any kill) and its exit says why
// (containerhook.HookError's reason and message), and the restart policy
// and back-off take it from there, as on a kubelet.
func (r *Runtime) postStart(ctx context.Context, p *podState, pod *v1.Pod, c *container) {
	f := r.podFeatures()
	spec := findContainer(pod, c.rec.Name)
	if f == nil || spec == nil || spec.Lifecycle == nil || spec.Lifecycle.PostStart == nil {
		return
	}
	r.mu.Lock()
	pr := c.proc
	r.mu.Unlock()
	if pr == nil {
		return
	}
	err := f.Hooks.PostStart(ctx, r.hookContainer(p, pod, c.rec.Name, pr.id))
	if !errors.Is(err, containerhook.ErrPostStartHook) {
		return
	}
	r.killContainer(ctx, p, pod, c, pr, podGracePeriod(pod), containerhook.ReasonFailedPostStartHook)
	var he *containerhook.HookError
	if !errors.As(err, &he) {
		return
	}
	r.mu.Lock()
	if e := c.rec.Exit; e != nil && e.ID == pr.id {
		e.Reason, e.Message = he.Reason, he.Message
		r.persistLocked(p, c)
	}
	r.mu.Unlock()
}

// podGracePeriod is the grace period a kill of one of pod's containers
// gets, by the kubelet's rule: the deletion's, else the spec's, else 2.
func podGracePeriod(pod *v1.Pod) int64 {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return containerhook.MinimumGracePeriodSeconds
}

// stopWithPreStop is r.stop(ctx, procs, grace) for a stage of
// SyncTerminatingPod (stopInOrder): each container of procs with a
// preStop hook runs it first, within grace, and is then stopped with what
// is left of it (at least containerhook.MinimumGracePeriodSeconds); the
// others get grace. All at once, as the kubelet kills a pod's containers.
func (r *Runtime) stopWithPreStop(ctx context.Context, p *podState, procs []*proc, grace time.Duration) error {
	f := r.podFeatures()
	type hooked struct {
		pr   *proc
		name string
	}
	var withHook []hooked
	var plain []*proc
	r.mu.Lock()
	pod := p.spec
	for _, pr := range procs {
		var spec *v1.Container
		if pod != nil {
			for name, c := range p.containers {
				if c.proc == pr {
					spec = findContainer(pod, name)
				}
			}
		}
		if f != nil && spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && grace >= time.Second {
			withHook = append(withHook, hooked{pr, spec.Name})
		} else {
			plain = append(plain, pr)
		}
	}
	r.mu.Unlock()
	if len(withHook) == 0 {
		return r.stop(ctx, procs, grace)
	}
	seconds := int64(grace / time.Second)
	errs := make([]error, len(withHook)+1)
	var wg sync.WaitGroup
	for i, h := range withHook {
		wg.Go(func() {
			left, _ := f.Hooks.PreStop(ctx, r.hookContainer(p, pod, h.name, h.pr.id), seconds)
			errs[i] = r.stop(ctx, []*proc{h.pr}, time.Duration(max(left, containerhook.MinimumGracePeriodSeconds))*time.Second)
		})
	}
	wg.Go(func() { errs[len(withHook)] = r.stop(ctx, plain, grace) })
	wg.Wait()
	return errors.Join(errs...)
}

// terminatedFeatures forgets the pod in the features once
// SyncTerminatedPod cleaned it up, and removes its volumes if the engine
// says they may go (the volume manager's Run does it later otherwise).
func (r *Runtime) terminatedFeatures(uid types.UID) {
	f := r.podFeatures()
	if f == nil {
		return
	}
	f.Probes.RemovePod(uid)
	f.Deadline.Forget(uid)
	if f.Volumes != nil {
		if _, err := f.Volumes.TearDown(uid); err != nil {
			r.log.Error(err, "Cannot remove a pod's volumes yet; the volume manager tries again", "podUID", uid)
		}
	}
}

// builtContainer is what the per-pod features built for one start of a
// container: its env entries, with their values, and its command and args
// with $(VAR) expanded.
type builtContainer struct {
	env           []v1.EnvVar
	command, args []string
}

// containerEnv builds the environment of the container spec about to
// start (podenv), with its command and args expanded against it, and keeps
// them in c for the start and the container's execs (withBuiltEnv). A
// *podenv.ConfigError (a missing secret, config map or key) is why the
// container waits, in CreateContainerConfigError.
func (r *Runtime) containerEnv(ctx context.Context, p *podState, pod *v1.Pod, spec *v1.Container, c *container) *reasonMessage {
	f := r.podFeatures()
	if f == nil {
		return nil
	}
	in := podenv.Inputs{HostIPs: r.hostIPs}
	r.mu.Lock()
	if p.sb != nil && len(p.sb.rec.IPs) > 0 {
		in.PodIPs = append([]string(nil), p.sb.rec.IPs...)
	}
	r.mu.Unlock()
	if len(in.PodIPs) == 0 && r.inHostNetwork(pod) {
		in.PodIPs = r.hostIPs
	}
	vars, err := f.Env.Build(ctx, pod, spec, in)
	if err == nil {
		var b builtContainer
		if b.command, b.args, err = f.Env.ExpandCommandAndArgs(spec, vars); err == nil {
			b.env = make([]v1.EnvVar, 0, len(vars))
			for _, v := range vars {
				b.env = append(b.env, v1.EnvVar{Name: v.Name, Value: v.Value})
			}
			r.mu.Lock()
			c.built = &b
			r.mu.Unlock()
			return nil
		}
	}
	var ce *podenv.ConfigError
	if errors.As(err, &ce) {
		return &reasonMessage{ce.Reason(), ce.Message}
	}
	return &reasonMessage{podenv.ReasonCreateContainerConfigError, err.Error()}
}

// withBuiltEnv returns spec with the environment, command and args
// containerEnv built for the current start of its container in pod (their
// values literal), or spec itself when none was built: what the command's
// resolution (launchOf) and the container's execs read. Called without
// r.mu held.
func (r *Runtime) withBuiltEnv(pod *v1.Pod, spec *v1.Container) *v1.Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[pod.UID]
	if p == nil || p.containers[spec.Name] == nil || p.containers[spec.Name].built == nil {
		return spec
	}
	b := p.containers[spec.Name].built
	out := *spec
	out.Env, out.Command, out.Args = b.env, b.command, b.args
	return &out
}

// inHostNetwork reports whether pod runs in the host's network, where its
// IPs are the node's: a hostNetwork pod, or any pod when the runtime has no
// sandboxes. A nil pod (one not synced yet) is not.
func (r *Runtime) inHostNetwork(pod *v1.Pod) bool {
	return pod != nil && (r.sandboxes == nil || pod.Spec.HostNetwork)
}

// defaultHostIPs are the node's addresses as pods' status.hostIP reads
// them when Options.HostIPs gives none: the global unicast addresses of
// the node's interfaces, IPv4 first, else the loopback.
func defaultHostIPs() []string {
	addrs, err := net.InterfaceAddrs()
	var v4, v6 []string
	if err == nil {
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || !ipn.IP.IsGlobalUnicast() {
				continue
			}
			if ipn.IP.To4() != nil {
				v4 = append(v4, ipn.IP.String())
			} else {
				v6 = append(v6, ipn.IP.String())
			}
		}
	}
	if out := append(v4, v6...); len(out) > 0 {
		return out[:1]
	}
	return []string{"127.0.0.1"}
}

// ReleaseVolumes unmounts what the volume manager of an agent on
// stateDir left mounted under its VolumeRoot (the memory file systems of
// secret, projected and memory emptyDir volumes), deepest first, for a
// harness that stops the pods' processes itself and then removes the
// state directory (package clustertest does): an agent's volume manager
// removes a pod's volumes only once the pod is gone, which a harness that
// kills everything never tells it. The pods' processes must be stopped.
// It returns the errors of the unmounts that failed.
func ReleaseVolumes(stateDir string) error {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return fmt.Errorf("processruntime: %w", err)
	}
	root := filepath.Join(abs, "volumes") + string(filepath.Separator)
	mounts, err := mountinfo.Read()
	if err != nil {
		return fmt.Errorf("processruntime: reading the mount table: %w", err)
	}
	var points []string
	for _, m := range mounts {
		if strings.HasPrefix(m.MountPoint, root) {
			points = append(points, m.MountPoint)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var errs []error
	for _, p := range points {
		if err := detachMount(p); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("processruntime: unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
