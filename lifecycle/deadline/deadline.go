package deadline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/internal/schedule"
	"github.com/podkit/podkit/podworker"
)

// The kubelet's reason and message for a pod past its deadline: its
// status's Reason and Message, and its event's.
const (
	Reason  = "DeadlineExceeded"
	Message = "Pod was active on the node longer than the specified deadline"
)

// RetryInterval is how often a sync of a pod past its deadline is asked
// for again while the pod workers have not begun to stop it (the
// kubelet's sync loop asks every second); once they have, the pod's timer
// ends at its next firing.
const RetryInterval = 10 * time.Second

// maxDeadline is the longest activeDeadlineSeconds the manager keeps a
// timer for (podworker.MaxDelay, about 100 years); a longer one is never
// reached while the agent runs.
const maxDeadline = int64(podworker.MaxDelay / time.Second)

// PodTermination is what the manager asks the pod workers about a pod,
// by UID: whether it may still run, so that a pod that stops is no longer
// timed. *podworker.PodWorkers implements it; the methods must be safe
// for concurrent use and must not block.
type PodTermination interface {
	// CouldHaveRunningContainers: false once the pod's containers are
	// known stopped, or for a pod the engine does not know once it has
	// synced. Such a pod is not timed.
	CouldHaveRunningContainers(uid types.UID) bool
	// IsPodTerminationRequested: true once the pod is to stop. Its timer
	// then ends (the final status still gets Check's answer).
	IsPodTerminationRequested(uid types.UID) bool
}

var _ PodTermination = (*podworker.PodWorkers[struct{}])(nil)

// Options configure a Manager. The zero value is valid: every field says
// what it defaults to.
type Options struct {
	// RequestSync asks for a sync of the pod (the agent's one way in for
	// runtime events): called when a pod's deadline passes, and again
	// every RetryInterval while the pod runs on. It must not block; it is
	// called from Run's goroutine, never with the manager's lock held.
	// Defaults to none: a pod past its deadline is then noticed only at
	// its next sync.
	RequestSync func(uid types.UID)
	// Recorder receives the kubelet's Normal DeadlineExceeded event, once
	// per pod. Defaults to event.Discard.
	Recorder event.Recorder
	// Clock measures the deadlines. Defaults to the real clock.
	Clock clock.Clock
	// Logger receives a panicking callback at level 0. Defaults to the
	// zero Logger, which discards.
	Logger logr.Logger
}

// Manager times each pod's activeDeadlineSeconds from its start time, and
// answers, for the runtime's SyncPod, whether a pod is past it.
type Manager struct {
	window PodTermination
	opts   Options
	sched  *schedule.Schedule[types.UID]
	ran    atomic.Bool

	mu sync.Mutex
	// timed holds the pods Check last saw running; true for those it
	// found past their deadline (their event was recorded). Each has a
	// time in sched: its deadline, or its next retry. sched holds no
	// other UID.
	timed map[types.UID]bool
}

// New returns a Manager that asks window whether a pod still runs. It
// starts nothing: call Run. window must not be nil (pass the pod
// workers).
func New(window PodTermination, opts Options) (*Manager, error) {
	if window == nil {
		return nil, errors.New("deadline: New needs a PodTermination (the pod workers), got nil")
	}
	opts.Recorder = event.OrDiscard(opts.Recorder)
	if opts.RequestSync == nil {
		opts.RequestSync = func(types.UID) {}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{window: window, opts: opts, sched: schedule.New[types.UID](opts.Clock), timed: make(map[types.UID]bool)}, nil
}

// Run serves the pods' timers until ctx ends, then returns nil. It may be
// called once; a second call returns an error at once. Check answers
// before and after Run; only the timers wait for it.
func (m *Manager) Run(ctx context.Context) error {
	if !m.ran.CompareAndSwap(false, true) {
		return errors.New("deadline: Run called twice")
	}
	m.sched.Run(ctx, func(uid types.UID, _ time.Time) { m.fire(uid) })
	return nil
}

// Check reports whether pod, which started at startTime (its
// status.startTime as the agent reports it; nil: not started, so not
// timed yet), is past its spec.activeDeadlineSeconds: now is at or after
// startTime plus the deadline, as the kubelet measures it. A deadline of 0
// or less is past at once; one beyond about 100 years is never reached.
//
// The runtime calls it in SyncPod with the pod it syncs, before starting
// anything: when it reports true, the runtime applies MarkFailed to the
// pod's status and returns terminal, so the pod workers stop the pod and
// it ends Failed with reason DeadlineExceeded. It calls it again for every
// status it builds for that pod (SyncTerminatingPod), so that the final
// status keeps that reason. The answer is computed from the pod given, so
// a deadline shortened on a running pod counts from the next sync, which
// the change itself brings.
//
// While the window says the pod runs, Check also arms the pod's timer for
// its deadline (replacing the one it had), which asks for a sync
// (RequestSync) when it passes; the first time it finds the pod past, it
// records the DeadlineExceeded event. For a pod the window says stops,
// Check only answers, and drops the pod's timer. A nil pod, or one with no
// UID, is an error (and false). It is safe for concurrent use.
func (m *Manager) Check(pod *v1.Pod, startTime *metav1.Time) (bool, error) {
	if pod == nil {
		return false, errors.New("deadline: Check needs a pod, got nil")
	}
	if pod.UID == "" {
		return false, fmt.Errorf("deadline: Check: pod %s/%s has no UID", pod.Namespace, pod.Name)
	}
	uid := pod.UID
	running := m.window.CouldHaveRunningContainers(uid) && !m.window.IsPodTerminationRequested(uid)
	now := m.opts.Clock.Now()
	deadline, timed := deadlineOf(pod, startTime)
	past := timed && !now.Before(deadline)

	m.mu.Lock()
	if !timed || !running {
		m.forgetLocked(uid)
		m.mu.Unlock()
		return past, nil
	}
	first := past && !m.timed[uid]
	m.timed[uid] = m.timed[uid] || past
	if past {
		m.sched.Set(uid, now.Add(RetryInterval))
	} else {
		m.sched.Set(uid, deadline)
	}
	m.mu.Unlock()

	if first {
		m.safely("Recorder", func() { m.opts.Recorder.Eventf(pod, v1.EventTypeNormal, Reason, Message) })
	}
	return past, nil
}

// deadlineOf returns when pod's active deadline passes; timed is false
// when it has none, has not started, or its deadline is beyond
// maxDeadline.
func deadlineOf(pod *v1.Pod, startTime *metav1.Time) (deadline time.Time, timed bool) {
	ads := pod.Spec.ActiveDeadlineSeconds
	if ads == nil || startTime == nil || startTime.IsZero() || *ads > maxDeadline {
		return time.Time{}, false
	}
	return startTime.Add(time.Duration(max(*ads, 0)) * time.Second), true
}

// MarkFailed sets status as the kubelet's for a pod past its deadline:
// phase Failed, reason DeadlineExceeded, the kubelet's message. It is
// idempotent; a nil status is left alone.
func MarkFailed(status *v1.PodStatus) {
	if status == nil {
		return
	}
	status.Phase, status.Reason, status.Message = v1.PodFailed, Reason, Message
}

// Forget drops the pod's timer. The runtime calls it once the pod is done
// (SyncTerminatedPod); a pod the window says stops also loses its timer
// at its next Check or firing.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetLocked(uid)
}

func (m *Manager) forgetLocked(uid types.UID) {
	delete(m.timed, uid)
	m.sched.Remove(uid)
}

// fire is called on Run's goroutine when a pod's deadline passes, or its
// retry comes: a pod that still runs gets a sync asked for, and a retry
// armed; a pod the window says stops is forgotten.
func (m *Manager) fire(uid types.UID) {
	running := m.window.CouldHaveRunningContainers(uid) && !m.window.IsPodTerminationRequested(uid)
	now := m.opts.Clock.Now()
	m.mu.Lock()
	if _, ok := m.timed[uid]; !ok {
		m.mu.Unlock()
		return
	}
	if !running {
		m.forgetLocked(uid)
		m.mu.Unlock()
		return
	}
	if _, armed := m.sched.Due(uid); !armed { // Check may have armed it anew meanwhile
		m.sched.Set(uid, now.Add(RetryInterval))
	}
	m.mu.Unlock()
	m.safely("RequestSync", func() { m.opts.RequestSync(uid) })
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
