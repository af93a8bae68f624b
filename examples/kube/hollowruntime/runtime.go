package hollowruntime

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/podworker"
)

// Errors of the runtime.
var (
	// ErrClosed: the runtime was closed.
	ErrClosed = errors.New("hollowruntime: runtime closed")
	// ErrNoProcesses: what was asked needs a process (exec, attach,
	// port-forward, logs), and a hollow container has none.
	ErrNoProcesses = errors.New("hollowruntime: a hollow container has no process (no exec, attach, port-forward or logs)")
	// ErrBackOff is wrapped by SyncPod's error while an exited container
	// waits out its restart backoff.
	ErrBackOff = errors.New("hollowruntime: back-off restarting failed container")
	// ErrCreateContainerConfig is wrapped by SyncPod's error while a
	// container cannot be created (its environment or program).
	ErrCreateContainerConfig = errors.New("hollowruntime: " + reasonCreateContainerConfigError)
)

const reasonCreateContainerConfigError = "CreateContainerConfigError"

// Options configure a Runtime. The zero value is valid.
type Options struct {
	// Clock times the programs, backoffs and grace periods. Defaults to
	// the real clock.
	Clock clock.WithDelayedExecution
	// Program says what each run of a container does. Defaults to
	// DefaultProgram.
	Program ProgramFunc
	// BackOff is the first restart backoff of a container that keeps
	// exiting (its first restart is at once); MaxBackOff caps it as it
	// doubles. Default to 10 seconds and 5 minutes, the kubelet's.
	BackOff, MaxBackOff time.Duration
	// OnEvent, when set, is told of each change, with the process
	// runtime's event types (ContainerStarted, ContainerExited,
	// PodStopped, ContainerKilling, ContainerBackOff, ContainerFailed). It
	// is called without the runtime's lock, from a hook's goroutine or a
	// program's timer, and must not block.
	OnEvent func(processruntime.Event)
	// Logger receives the runtime's logs. Defaults to discarding them.
	Logger logr.Logger
	// HostIPs are the node's addresses, the primary first: the pods'
	// status.hostIP and status.hostIPs, the IPs of a hostNetwork pod, and
	// what env's status.hostIP reads. Empty: pods report none.
	HostIPs []string
}

// Runtime is the hollow runtime. Create it with New.
type Runtime struct {
	clock      clock.WithDelayedExecution
	program    ProgramFunc
	backOff    time.Duration
	maxBackOff time.Duration
	onEvent    func(processruntime.Event)
	log        logr.Logger
	hostIPs    []string
	features   atomic.Pointer[lifecycle.PodFeatures]

	mu sync.Mutex
	// pods holds every pod synced and not yet synced again after its
	// cleanup (a cleaned pod is kept, as a tombstone, for its final
	// status).
	pods   map[types.UID]*pod
	closed bool
	// starts counts the container runs started, for unique container IDs
	// (a UID started again after its cleanup gets new ones).
	starts uint64
	// network is the pod range (StartNetwork), next the next address to
	// try, used the addresses pods hold (each in exactly one pod's ip).
	network netip.Prefix
	next    netip.Addr
	used    map[netip.Addr]bool
}

// pod is one pod's state. Guarded by Runtime.mu.
type pod struct {
	uid             types.UID
	namespace, name string
	startedAt       time.Time
	spec            *v1.Pod
	containers      map[string]*container
	// terminating is set when SyncTerminatingPod starts, stopped when it
	// succeeded (nothing runs, nothing will start), cleaned when
	// SyncTerminatedPod ran.
	terminating, stopped, cleaned bool
	deadlineExceeded              bool
	ip                            netip.Addr
}

// container is one container's state. Guarded by Runtime.mu. state is
// Running iff the current run has not ended (timer, when set, will end
// it).
type container struct {
	name, image string
	init        bool
	state       processruntime.ContainerState
	id          string
	startedAt   time.Time
	// exit is how the latest run ended, lastExit the one before it.
	exit, lastExit *processruntime.ExitStatus
	restarts       int32
	// backOff is the current restart backoff (0 until the first restart).
	backOff time.Duration
	runs    int
	// program is the current run's; timer ends it when it exits on its own.
	program Program
	timer   clock.Timer
	// waitReason and waitMessage say why the container cannot be created.
	waitReason, waitMessage string
}

var (
	_ podworker.PodSyncer[processruntime.PodStatus]      = (*Runtime)(nil)
	_ podworker.RuntimePodSyncer                         = (*Runtime)(nil)
	_ podworker.StatusSource[processruntime.PodStatus]   = (*Runtime)(nil)
	_ podworker.StoppedChecker[processruntime.PodStatus] = (*Runtime)(nil)
	_ admission.Handler                                  = (*Runtime)(nil)
)

// New returns an empty runtime. It starts no goroutines.
func New(opts Options) (*Runtime, error) {
	if opts.BackOff < 0 || opts.MaxBackOff < 0 {
		return nil, fmt.Errorf("hollowruntime: BackOff %v and MaxBackOff %v: want 0 (the default) or more", opts.BackOff, opts.MaxBackOff)
	}
	if opts.BackOff == 0 {
		opts.BackOff = 10 * time.Second
	}
	if opts.MaxBackOff == 0 {
		opts.MaxBackOff = max(5*time.Minute, opts.BackOff)
	}
	if opts.MaxBackOff < opts.BackOff {
		return nil, fmt.Errorf("hollowruntime: MaxBackOff %v is below BackOff %v", opts.MaxBackOff, opts.BackOff)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Program == nil {
		opts.Program = DefaultProgram
	}
	for i, ip := range opts.HostIPs {
		if _, err := netip.ParseAddr(ip); err != nil {
			return nil, fmt.Errorf("hollowruntime: HostIPs[%d] %q is not an IP address", i, ip)
		}
	}
	return &Runtime{
		clock: opts.Clock, program: opts.Program, backOff: opts.BackOff, maxBackOff: opts.MaxBackOff,
		onEvent: opts.OnEvent, log: opts.Logger, hostIPs: append([]string(nil), opts.HostIPs...),
		pods: map[types.UID]*pod{}, used: map[netip.Addr]bool{},
	}, nil
}

// Close stops the programs' timers; every later hook fails with
// ErrClosed. It is idempotent and returns nil.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, p := range r.pods {
		for _, c := range p.containers {
			c.stopTimer()
		}
	}
	return nil
}

// UsePodFeatures gives the runtime the agent's per-pod features: SyncPod
// builds each container's environment with f.Env and enforces
// activeDeadlineSeconds with f.Deadline. Call it before the first sync.
func (r *Runtime) UsePodFeatures(f *lifecycle.PodFeatures) { r.features.Store(f) }

// StartNetwork gives the runtime the node's pod range: each pod synced
// from then on gets an address of it (bridge is not used: nothing is
// made). An invalid prefix, or one of fewer than 4 addresses, is an
// error. Call it once, before the first sync.
func (r *Runtime) StartNetwork(podCIDR netip.Prefix, _ string) error {
	if !podCIDR.IsValid() || podCIDR.Addr().BitLen()-podCIDR.Bits() < 2 {
		return fmt.Errorf("hollowruntime: pod range %v: want a valid prefix of 4 addresses or more", podCIDR)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.network = podCIDR.Masked()
	r.next = r.network.Addr().Next().Next() // the network's and the gateway's are taken
	return nil
}

// Containment describes the hollow runtime's containment: none, since
// nothing runs.
func (r *Runtime) Containment() processruntime.Containment {
	return processruntime.Containment{Fallback: "hollow runtime: no processes", SandboxFallback: "hollow runtime: no processes", Network: "hollow (addresses only)"}
}

// Admit admits every pod: a hollow pod reaches nothing of the host.
func (r *Runtime) Admit(context.Context, *admission.Attributes) admission.Result {
	return admission.Result{Admit: true}
}

// PodStatus returns the pod's status now (newerThan is always met); a pod
// the runtime does not know has the zero status with UID and Time set.
func (r *Runtime) PodStatus(_ context.Context, uid types.UID, _ time.Time) (processruntime.PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pods[uid]; p != nil {
		return r.snapshotLocked(p), nil
	}
	return processruntime.PodStatus{UID: uid, Time: r.clock.Now(), HostIPs: append([]string(nil), r.hostIPs...)}, nil
}

// NothingRunning reports whether status shows no running container.
func (r *Runtime) NothingRunning(status processruntime.PodStatus) bool { return !status.Running() }

// RuntimePods lists the pods the runtime holds that were not cleaned up,
// for housekeeping.
func (r *Runtime) RuntimePods() []podworker.RuntimePod {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]podworker.RuntimePod, 0, len(r.pods))
	for _, p := range r.pods {
		if !p.cleaned {
			out = append(out, podworker.RuntimePod{UID: p.uid, Namespace: p.namespace, Name: p.name})
		}
	}
	return out
}

// snapshotLocked builds p's status, its containers in spec order.
func (r *Runtime) snapshotLocked(p *pod) processruntime.PodStatus {
	now := r.clock.Now()
	s := processruntime.PodStatus{
		UID: p.uid, Namespace: p.namespace, Name: p.name, StartedAt: p.startedAt,
		Stopped: p.stopped, Time: now, DeadlineExceeded: p.deadlineExceeded,
	}
	s.PodIPs = r.podIPsLocked(p)
	s.HostIPs = append([]string(nil), r.hostIPs...)
	add := func(list []processruntime.ContainerStatus, specs []v1.Container) []processruntime.ContainerStatus {
		for i := range specs {
			if c := p.containers[specs[i].Name]; c != nil {
				list = append(list, r.containerStatusLocked(c, now))
			}
		}
		return list
	}
	if p.spec != nil {
		s.InitContainers = add(nil, p.spec.Spec.InitContainers)
		s.Containers = add(nil, p.spec.Spec.Containers)
	}
	return s
}

func (r *Runtime) containerStatusLocked(c *container, now time.Time) processruntime.ContainerStatus {
	cs := processruntime.ContainerStatus{
		Name: c.name, Image: c.image, State: c.state, ID: c.id, RestartCount: c.restarts,
		Exit: copyExit(c.exit), LastExit: copyExit(c.lastExit),
		WaitReason: c.waitReason, WaitMessage: c.waitMessage,
	}
	switch c.state {
	case processruntime.ContainerStateRunning:
		cs.StartedAt = c.startedAt
		cs.WaitReason, cs.WaitMessage = "", ""
	case processruntime.ContainerStateExited:
		if w := r.restartWait(c, now); w > 0 {
			cs.BackOffUntil = now.Add(w)
		}
		cs.BackOff = c.backOff
	}
	return cs
}

func copyExit(e *processruntime.ExitStatus) *processruntime.ExitStatus {
	if e == nil {
		return nil
	}
	out := *e
	return &out
}

// restartWait is how long exited c must still wait before it restarts:
// 0 for the first restart and once its backoff has passed.
func (r *Runtime) restartWait(c *container, now time.Time) time.Duration {
	if c.exit == nil || c.backOff == 0 {
		return 0
	}
	return max(c.exit.FinishedAt.Add(c.backOff).Sub(now), 0)
}

// stopTimer stops the current run's timer, if any.
func (c *container) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// podIPsLocked are p's IPs: its address of the pod range, or the node's
// (HostIPs) for a hostNetwork pod, or none.
func (r *Runtime) podIPsLocked(p *pod) []string {
	switch {
	case p.ip.IsValid():
		return []string{p.ip.String()}
	case p.spec != nil && p.spec.Spec.HostNetwork:
		return append([]string(nil), r.hostIPs...)
	}
	return nil
}

// allocateIPLocked gives p an address of the pod range, if there is one
// and an address is free.
func (r *Runtime) allocateIPLocked(p *pod) {
	if !r.network.IsValid() || (p.spec != nil && p.spec.Spec.HostNetwork) {
		return
	}
	start := r.next
	for {
		a := r.next
		r.next = a.Next()
		if !r.network.Contains(r.next) || r.next == lastAddr(r.network) {
			r.next = r.network.Addr().Next().Next()
		}
		if !r.used[a] {
			r.used[a] = true
			p.ip = a
			return
		}
		if r.next == start {
			r.log.Info("The pod range is full: the pod has no address", "pod", p.namespace+"/"+p.name, "range", r.network.String())
			return
		}
	}
}

// releaseIPLocked returns p's address to the range.
func (r *Runtime) releaseIPLocked(p *pod) {
	if p.ip.IsValid() {
		delete(r.used, p.ip)
		p.ip = netip.Addr{}
	}
}

// lastAddr is the prefix's last address (its broadcast address in IPv4).
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().AsSlice()
	host := a
	bits := p.Bits()
	for i := range host {
		for b := 0; b < 8; b++ {
			if i*8+b >= bits {
				host[i] |= 0x80 >> b
			}
		}
	}
	out, _ := netip.AddrFromSlice(host)
	return out.Unmap()
}

// emit sends events, in order, to OnEvent. Called without r.mu.
func (r *Runtime) emit(evs ...processruntime.Event) {
	if r.onEvent == nil {
		return
	}
	for _, ev := range evs {
		r.onEvent(ev)
	}
}

// eventLocked builds an event of p's, with its current status.
func (r *Runtime) eventLocked(t processruntime.EventType, p *pod, c *container) processruntime.Event {
	ev := processruntime.Event{Type: t, UID: p.uid, Namespace: p.namespace, Name: p.name, Status: r.snapshotLocked(p)}
	if c != nil {
		ev.Container, ev.Init = c.name, c.init
	}
	return ev
}
