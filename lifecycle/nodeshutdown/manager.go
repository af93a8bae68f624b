package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// ReasonNodeShutdown is the admission rejection reason of every pod the
// Manager refuses once Shutdown was called: the node is shutting down.
const ReasonNodeShutdown = "NodeShutdown"

// MessageNodeShutdown is the message of such a rejection.
const MessageNodeShutdown = "Pod was rejected as the node is shutting down."

// Workers is what a Manager needs from the pod workers: the snapshots of
// the pods they have, and the kills. *podworker.PodWorkers[T] implements
// it. Both methods are called from Shutdown's goroutine, must be safe for
// concurrent use and must not block on hooks.
type Workers interface {
	// Pods returns a snapshot of every worker; the slice is the caller's.
	Pods() []podworker.PodInfo
	// UpdatePod hands the workers a kill; an error means it was not taken.
	UpdatePod(ctx context.Context, opts podworker.UpdatePodOptions) error
}

var _ Workers = (*podworker.PodWorkers[struct{}])(nil)

// Options configure a Manager. The zero value is valid.
type Options struct {
	// Logger receives the shutdown's progress at level 0 and each kill at
	// V(4). Defaults to the zero Logger, which discards.
	Logger logr.Logger
	// Clock times the budget and stamps the DisruptionTarget condition.
	// Defaults to the real clock.
	Clock clock.WithTicker
}

// Budget is how long a node shutdown may take.
type Budget struct {
	// GracePeriod is the whole budget: Shutdown returns at most this long
	// after it starts (plus the time its kills take to hand over). It must
	// be positive.
	GracePeriod time.Duration
	// CriticalGracePeriod is the part of GracePeriod kept for critical
	// pods (IsCritical): other pods get GracePeriod minus it, then critical
	// pods get what is left. It must be between 0 and GracePeriod. Defaults
	// to 0: critical pods get only what the other pods leave.
	CriticalGracePeriod time.Duration
}

// Pod describes one pod Shutdown dealt with.
type Pod struct {
	// UID is the pod's UID.
	UID types.UID
	// FullName is "name_namespace".
	FullName string
	// Critical is true for pods of the critical group (IsCritical).
	Critical bool
	// GracePeriod is the grace period, in seconds, the kill asked for; 0
	// when the pod was never asked (the budget or ctx ran out first, or the
	// workers refused the kill).
	GracePeriod int64
}

// Report says how a node shutdown went. Pods are sorted by group (other
// pods first, then critical pods) and full name.
type Report struct {
	// Terminated are the pods known to have no running container when
	// Shutdown returned.
	Terminated []Pod
	// NotTerminated are the pods that could still have running containers.
	// Their termination goes on as long as the pod workers run.
	NotTerminated []Pod
}

// ErrBudgetSpent is wrapped by the error Shutdown returns when its budget
// ran out before every pod was terminated; the report lists them. Test with
// errors.Is.
var ErrBudgetSpent = errors.New("nodeshutdown: node shutdown budget spent before every pod terminated")

const (
	shutdownReason  = "Terminated"
	shutdownMessage = "Pod was terminated in response to imminent node shutdown."
)

// Manager is a node's graceful shutdown, as the kubelet's node shutdown
// manager: it stops every pod the workers have, in two groups with a
// budget each, and refuses new pods from the moment it starts. It talks to
// the rest of the agent only through the pod workers (snapshots and kills)
// and admission (it is an admission.Handler: put it first in the sync
// loop's admission handlers, as lifecycle.Agent does).
//
// Create it with New. Its methods are safe for concurrent use.
type Manager struct {
	workers Workers
	log     logr.Logger
	clock   clock.WithTicker

	// shuttingDown is set by the first Shutdown and never cleared.
	shuttingDown atomic.Bool
}

var _ admission.Handler = (*Manager)(nil)

// New returns a Manager over workers. It starts nothing. It returns an
// error, prefixed "nodeshutdown: ", for nil workers.
func New(workers Workers, opts Options) (*Manager, error) {
	if workers == nil {
		return nil, errors.New("nodeshutdown: New needs the pod workers, got nil")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{workers: workers, log: opts.Logger, clock: opts.Clock}, nil
}

// Admit implements admission.Handler: once Shutdown was called it refuses
// every pod, with ReasonNodeShutdown; before, it admits every pod. It is
// called from the sync loop, never blocks, and calls nothing.
func (m *Manager) Admit(context.Context, *admission.Attributes) admission.Result {
	if m.shuttingDown.Load() {
		return admission.Result{Reason: ReasonNodeShutdown, Message: MessageNodeShutdown}
	}
	return admission.Result{Admit: true}
}

// ShuttingDown reports whether Shutdown was called. Safe from any
// goroutine.
func (m *Manager) ShuttingDown() bool { return m.shuttingDown.Load() }

// Shutdown stops every pod on the node for a node shutdown, in two groups:
// first every pod that is not critical (IsCritical), then the critical
// ones, each group given until its share of budget.GracePeriod runs out
// (see Budget). Every pod of a group is killed at once, with its grace
// period capped by the seconds left in its group (and by its own
// spec.terminationGracePeriodSeconds, the smaller wins, at least 1); the
// final status the syncer gets (through the kill's PodStatusFunc) is phase
// Failed (unless Succeeded), reason "Terminated", and a DisruptionTarget
// condition. The critical group starts as soon as the first has terminated
// or its time is up.
//
// From the first call on, Admit refuses every pod (ReasonNodeShutdown),
// which keeps the sync loop from starting new pods and housekeeping from
// re-adding any. The pods are those the workers have that are not yet
// terminated, pods known only from the runtime included (they count as not
// critical).
//
// Call it from any goroutine, typically on a shutdown signal while the
// sync loop runs (so removals and housekeeping keep working); it does not
// stop the sync loop or the workers. It blocks until every pod is
// terminated, the budget is spent, or ctx ends, and returns the report
// with: nil when every pod is terminated; an error wrapping ErrBudgetSpent
// when the budget ran out first; ctx.Err() when ctx ended first; an error
// wrapping the workers' error (podworker.ErrStopped, say) when they refused
// a kill. An invalid budget gives an error, prefixed "nodeshutdown: ", and
// nothing is done.
func (m *Manager) Shutdown(ctx context.Context, budget Budget) (Report, error) {
	switch {
	case budget.GracePeriod <= 0:
		return Report{}, fmt.Errorf("nodeshutdown: Budget.GracePeriod is %v; want more than 0", budget.GracePeriod)
	case budget.CriticalGracePeriod < 0 || budget.CriticalGracePeriod > budget.GracePeriod:
		return Report{}, fmt.Errorf("nodeshutdown: Budget.CriticalGracePeriod is %v; want 0 to GracePeriod (%v)", budget.CriticalGracePeriod, budget.GracePeriod)
	}
	m.shuttingDown.Store(true)
	start := m.clock.Now()
	deadline := start.Add(budget.GracePeriod)

	var regular, critical []*shutdownPod
	for _, info := range m.workers.Pods() {
		if info.Stage >= podworker.StageTerminated {
			continue
		}
		sp := &shutdownPod{info: info, Pod: Pod{UID: info.UID, FullName: info.FullName, Critical: IsCritical(info.Pod)}}
		if sp.Critical {
			critical = append(critical, sp)
		} else {
			regular = append(regular, sp)
		}
	}
	byName := func(a, b *shutdownPod) int { return strings.Compare(a.FullName, b.FullName) }
	slices.SortFunc(regular, byName)
	slices.SortFunc(critical, byName)
	m.log.Info("Shutting down the node's pods", "pods", len(regular), "criticalPods", len(critical), "gracePeriod", budget.GracePeriod, "criticalGracePeriod", budget.CriticalGracePeriod)

	var firstErr error
	err := m.shutdownGroup(ctx, regular, deadline.Add(-budget.CriticalGracePeriod))
	if err == nil {
		err = m.shutdownGroup(ctx, critical, deadline)
	}
	if err != nil {
		firstErr = err
	}

	var report Report
	for _, sp := range slices.Concat(regular, critical) {
		if sp.done() {
			report.Terminated = append(report.Terminated, sp.Pod)
		} else {
			report.NotTerminated = append(report.NotTerminated, sp.Pod)
		}
		if sp.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("nodeshutdown: killing pod %s: %w", sp.FullName, sp.err)
		}
	}
	if firstErr == nil && len(report.NotTerminated) > 0 {
		firstErr = fmt.Errorf("%w: %d pods may still run after %v", ErrBudgetSpent, len(report.NotTerminated), budget.GracePeriod)
	}
	m.log.Info("Node shutdown done", "terminated", len(report.Terminated), "notTerminated", len(report.NotTerminated))
	return report, firstErr
}

// shutdownPod is one pod's progress through Shutdown.
type shutdownPod struct {
	Pod
	info podworker.PodInfo
	// completed is closed by the workers once the pod is terminated; nil
	// until the kill was handed over.
	completed chan struct{}
	err       error
}

func (sp *shutdownPod) done() bool {
	if sp.completed == nil {
		return false
	}
	select {
	case <-sp.completed:
		return true
	default:
		return false
	}
}

// shutdownGroup kills pods with grace periods that fit before until, and
// waits until they are all terminated or until has passed. It returns
// ctx.Err() if ctx ends first.
func (m *Manager) shutdownGroup(ctx context.Context, pods []*shutdownPod, until time.Time) error {
	if len(pods) == 0 {
		return ctx.Err()
	}
	left := until.Sub(m.clock.Now())
	budget := max(int64(left/time.Second), 1)
	for _, sp := range pods {
		grace := budget
		opts := podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, StartTime: m.clock.Now()}
		var generation int64
		if pod := sp.info.Pod; pod != nil {
			generation = pod.Generation
			if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g < grace {
				grace = max(*g, 1)
			}
			opts.Pod = pod
		} else {
			name, namespace, err := mirror.ParsePodFullName(sp.FullName)
			if err != nil {
				name = sp.FullName
			}
			opts.RunningPod = &podworker.RuntimePod{UID: sp.UID, Namespace: namespace, Name: name}
		}
		completed := make(chan struct{})
		g := grace
		opts.KillPodOptions = &podworker.KillPodOptions{
			CompletedCh:                              completed,
			PodTerminationGracePeriodSecondsOverride: &g,
			PodStatusFunc:                            m.shutdownStatus(generation),
		}
		m.log.V(4).Info("Killing pod for node shutdown", "pod", sp.FullName, "podUID", sp.UID, "critical", sp.Critical, "gracePeriod", grace)
		if err := m.workers.UpdatePod(ctx, opts); err != nil {
			sp.err = err
			continue
		}
		sp.completed = completed
		sp.GracePeriod = grace
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if left <= 0 {
		return nil
	}
	timer := m.clock.NewTimer(left)
	defer timer.Stop()
	for _, sp := range pods {
		if sp.completed == nil {
			continue
		}
		select {
		case <-sp.completed:
		case <-timer.C():
			m.log.Info("Node shutdown: time is up for a group of pods", "critical", sp.Critical)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// shutdownStatus returns the final-status function of a pod killed for
// node shutdown, whose DisruptionTarget condition observes generation (the
// pod's, as the kubelet's; for a pod known only from the runtime, 0, and
// the status's own observedGeneration stands in). The syncer calls it
// from a worker goroutine; it is idempotent.
func (m *Manager) shutdownStatus(generation int64) func(*v1.PodStatus) {
	return func(status *v1.PodStatus) {
		if status.Phase != v1.PodSucceeded {
			status.Phase = v1.PodFailed
		}
		status.Reason = shutdownReason
		status.Message = shutdownMessage
		observed := generation
		if observed == 0 {
			observed = status.ObservedGeneration
		}
		podstatus.SetCondition(status, v1.PodCondition{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: observed,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonTerminationByKubelet,
			Message:            shutdownMessage,
			LastTransitionTime: metav1.NewTime(m.clock.Now()),
		})
	}
}
