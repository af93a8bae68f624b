package probe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle/internal/action"
	"github.com/podkit/podkit/lifecycle/internal/schedule"
)

// maxAttempts is how many times a check is tried when it cannot be made
// at all (an error, not a failure), as the kubelet's three.
const maxAttempts = 3

// Manager runs the liveness, readiness and startup probes of the pods a
// runtime reports through UpdatePodStatus, and answers, for the runtime's
// SyncPod, which containers are started, ready, or to be killed.
type Manager struct {
	window PodTermination
	opts   Options
	http   *action.HTTP
	sched  *schedule.Schedule[key]
	start  time.Time // when the manager was made: first probes are jittered within a period of it
	// jitter returns a delay in [0, d); tests replace it.
	jitter func(d time.Duration) time.Duration

	ran    atomic.Bool
	checks sync.WaitGroup // the goroutines of checks in flight
	calls  action.Calls   // exec runner calls, which may outlive their check

	mu sync.Mutex
	// pods holds the probes of every pod UpdatePodStatus reported that
	// the window still lets run. Every worker in it that is live has a
	// due time in sched, except one whose container ended for good; sched
	// holds no key of a worker not in it.
	pods map[types.UID]*podProbes
}

// podProbes are the probes of one pod.
type podProbes struct {
	pod     *v1.Pod // the newest given to UpdatePodStatus
	host    string  // where httpGet, tcpSocket and grpc probes connect
	workers map[wkey]*worker
}

// wkey names a worker within its pod; key names it in the manager.
type wkey struct {
	container string
	typ       Type
}

type key struct {
	uid types.UID
	wkey
}

// New returns a Manager that asks window whether a pod may still run. It
// starts nothing: call Run. window must not be nil (pass the pod
// workers).
func New(window PodTermination, opts Options) (*Manager, error) {
	if window == nil {
		return nil, errors.New("probe: New needs a PodTermination (the pod workers), got nil")
	}
	opts.complete()
	return &Manager{
		window: window,
		opts:   opts,
		http:   action.NewHTTP("probe"),
		sched:  schedule.New[key](opts.Clock),
		start:  opts.Clock.Now(),
		jitter: func(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d))) },
		pods:   make(map[types.UID]*podProbes),
	}, nil
}

// Run probes until ctx ends, then waits for every check in flight (their
// ctx is cancelled) and every exec call it started, and returns nil. It
// may be called once; a second call returns an error at once. Probes
// registered before Run start once it runs; after it returned, results
// stay readable and no probe runs.
func (m *Manager) Run(ctx context.Context) error {
	if !m.ran.CompareAndSwap(false, true) {
		return errors.New("probe: Run called twice")
	}
	m.sched.Run(ctx, func(k key, due time.Time) { m.fire(ctx, k, due) })
	m.checks.Wait()
	m.calls.Wait()
	return nil
}

// RemovePod forgets every probe and result of the pod. The runtime calls
// it once the pod's containers are stopped for good (SyncTerminatedPod);
// the manager also forgets a pod by itself once the window says it cannot
// run, at the next due probe. A check in flight for the pod is dropped.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removePodLocked(uid)
}

func (m *Manager) removePodLocked(uid types.UID) {
	p := m.pods[uid]
	if p == nil {
		return
	}
	for wk := range p.workers {
		m.sched.Remove(key{uid, wk})
	}
	delete(m.pods, uid)
}

// firstDelay is how long after now a new worker of the given period first
// probes: at once, except while the manager is younger than one period,
// when a random part of the period is waited (an agent restarting with
// many pods does not probe them all at once), as the kubelet does.
func (m *Manager) firstDelay(period time.Duration, now time.Time) time.Duration {
	if now.Sub(m.start) < period {
		return m.jitter(period)
	}
	return 0
}

// fire is called by the schedule, on Run's goroutine, when the worker k
// is due: it asks the window, ticks the worker on (keeping its phase, as a
// ticker), and starts a check when one is due.
func (m *Manager) fire(ctx context.Context, k key, due time.Time) {
	couldRun := m.window.CouldHaveRunningContainers(k.uid)
	terminating := couldRun && m.window.IsPodTerminationRequested(k.uid)
	now := m.opts.Clock.Now()

	m.mu.Lock()
	p := m.pods[k.uid]
	var w *worker
	if p != nil {
		w = p.workers[k.wkey]
	}
	switch {
	case w == nil:
		m.mu.Unlock()
		return
	case !couldRun:
		m.removePodLocked(k.uid)
		m.mu.Unlock()
		return
	case terminating:
		w.stop()
		m.mu.Unlock()
		return
	case !w.live():
		m.mu.Unlock()
		return
	}
	if w.hasInst && !w.inst.running && w.inst.final {
		// The container ended and will not run again: no more ticks
		// until UpdatePodStatus reports a new run.
		m.mu.Unlock()
		return
	}
	m.sched.Set(k, schedule.Next(due, now, w.set.period))
	if !w.due(now, gateLocked(p, k)) {
		m.mu.Unlock()
		return
	}
	if w.checking {
		w.missed = true
		m.mu.Unlock()
		return
	}
	if w.execDone != nil {
		select {
		case <-w.execDone:
			w.execDone = nil
		default:
			m.mu.Unlock()
			m.opts.Logger.V(2).Info("Exec probe skipped: the previous call, abandoned at its timeout, has not returned",
				"podUID", k.uid, "container", k.container, "probeType", k.typ)
			return
		}
	}
	w.checking = true
	c, _, _ := action.FindContainer(p.pod, k.container)
	in := checkInput{key: k, w: w, gen: w.gen, pod: p.pod, c: c, probe: w.probe, set: w.set, containerID: w.inst.id, host: p.host}
	m.mu.Unlock()

	m.checks.Add(1)
	go m.check(ctx, in)
}

// gateLocked reports whether the startup gate counts the container of k
// as started: it has no startup probe, or that probe passed for the
// current run — and, for the liveness and readiness probes that the gate
// opens, a status (UpdatePodStatus) has reported it started since.
func gateLocked(p *podProbes, k key) bool {
	sw := p.workers[wkey{k.container, Startup}]
	if sw == nil {
		return true
	}
	passed := sw.invalid == nil && sw.hasInst && sw.result == resultSuccess
	return passed && (k.typ == Startup || sw.announced)
}

// checkInput is what a check needs, copied out under the lock.
type checkInput struct {
	key
	w           *worker
	gen         uint64
	pod         *v1.Pod
	c           *v1.Container
	probe       *v1.Probe
	set         settings
	containerID string
	host        string
}

// check runs one check on its own goroutine and hands the result to
// finish.
func (m *Manager) check(ctx context.Context, in checkInput) {
	defer m.checks.Done()
	var res action.Result
	var execDone <-chan struct{}
	for attempt := 1; ; attempt++ {
		res, execDone = m.probeOnce(ctx, in)
		if res.Outcome != action.Unknown || attempt == maxAttempts || ctx.Err() != nil || !closed(execDone) {
			break
		}
	}
	m.finish(ctx, in, res, execDone)
}

// probeOnce runs the probe's action once, within its timeout.
func (m *Manager) probeOnce(ctx context.Context, in checkInput) (res action.Result, execDone <-chan struct{}) {
	execDone = closedCh
	defer func() {
		if p := recover(); p != nil {
			m.opts.Logger.Error(fmt.Errorf("%v", p), "Probe panicked", "podUID", in.uid, "container", in.container, "probeType", in.typ)
			res = action.Result{Outcome: action.Unknown, Err: fmt.Errorf("probe panicked: %v", p)}
		}
	}()
	tctx, cancel := action.WithTimeout(ctx, m.opts.Clock, in.set.timeout)
	defer cancel()
	switch in.set.handler {
	case handlerExec:
		return action.Exec(tctx, &m.calls, m.opts.Exec, in.containerID, action.ExpandStatic(in.probe.Exec.Command, in.c.Env), in.set.timeout)
	case handlerHTTP:
		return m.http.Probe(tctx, in.probe.HTTPGet, in.c, in.host), execDone
	case handlerTCP:
		return action.TCP(tctx, in.probe.TCPSocket, in.c, in.host), execDone
	default:
		return action.GRPC(tctx, in.probe.GRPC, in.host, in.set.timeout), execDone
	}
}

var closedCh = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// finish records a check's result in its worker, unless the worker
// changed meanwhile (a new run, a stop, a removal) or Run is shutting
// down, then records the kubelet's event and asks for a sync if the
// decision changed in a way the runtime acts on.
func (m *Manager) finish(ctx context.Context, in checkInput, res action.Result, execDone <-chan struct{}) {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	p := m.pods[in.uid]
	if p == nil || p.workers[in.wkey] != in.w {
		m.mu.Unlock()
		return
	}
	w := in.w
	w.checking = false
	if !closed(execDone) {
		w.execDone = execDone
	}
	if w.missed {
		w.missed = false
		if w.live() {
			m.sched.Set(in.key, now)
		}
	}
	if w.gen != in.gen || ctx.Err() != nil {
		m.mu.Unlock()
		return
	}
	changed := false
	switch res.Outcome {
	case action.Success, action.Warning:
		changed = w.record(resultSuccess)
	case action.Failure:
		changed = w.record(resultFailure)
	}
	decision := w.result
	sync := changed && w.wantsSync(decision)
	m.mu.Unlock()

	ref := action.ContainerRef(in.pod, in.container)
	switch res.Outcome {
	case action.Warning:
		m.event(ref, ReasonProbeWarning, "%s probe warning: %s", in.typ, res.Output)
	case action.Failure:
		m.event(ref, ReasonUnhealthy, "%s probe failed: %s", in.typ, res.Output)
	case action.Unknown:
		m.event(ref, ReasonUnhealthy, "%s probe errored and resulted in %s state: %s", in.typ, res.Outcome, res.Err)
	}
	m.opts.Logger.V(4).Info("Probe checked", "podUID", in.uid, "container", in.container, "probeType", in.typ,
		"outcome", res.Outcome.String(), "changed", changed)
	if sync {
		m.safely("RequestSync", func() { m.opts.RequestSync(in.uid) })
	}
}

// Event reasons the manager records, the kubelet's (pkg/kubelet/events).
const (
	// ReasonUnhealthy (Warning): a probe failed, or could not be run.
	ReasonUnhealthy = "Unhealthy"
	// ReasonProbeWarning (Warning): a probe passed with a warning (an
	// HTTP redirect to another host, not followed).
	ReasonProbeWarning = "ProbeWarning"
)

func (m *Manager) event(ref *v1.ObjectReference, reason, format string, args ...any) {
	m.safely("Recorder", func() { m.opts.Recorder.Eventf(ref, v1.EventTypeWarning, reason, format, args...) })
}

// safely calls an embedder's callback, surviving a panic in it.
func (m *Manager) safely(what string, f func()) {
	defer func() {
		if p := recover(); p != nil {
			m.opts.Logger.Error(fmt.Errorf("%v", p), "Callback panicked", "callback", what)
		}
	}()
	f()
}
