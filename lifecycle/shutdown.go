package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// ReasonNodeShutdown is the admission rejection reason of every pod added
// once ShutdownNode was called: the node is shutting down.
const ReasonNodeShutdown = "NodeShutdown"

// ShutdownOptions configure ShutdownNode.
type ShutdownOptions struct {
	// GracePeriod is the whole budget: ShutdownNode returns at most this
	// long after it starts (plus the time its kills take to hand over).
	// It must be positive.
	GracePeriod time.Duration
	// CriticalGracePeriod is the part of GracePeriod kept for critical
	// pods (IsCriticalPod): other pods get GracePeriod minus it, then
	// critical pods get what is left. It must be between 0 and
	// GracePeriod. Defaults to 0: critical pods get only what the other
	// pods leave.
	CriticalGracePeriod time.Duration
}

// ShutdownPod describes one pod ShutdownNode dealt with.
type ShutdownPod struct {
	// UID is the pod's UID.
	UID types.UID
	// FullName is "name_namespace".
	FullName string
	// Critical is true for pods of the critical group (IsCriticalPod).
	Critical bool
	// GracePeriod is the grace period, in seconds, the kill asked for; 0
	// when the pod was never asked (the budget or ctx ran out first, or the
	// workers refused the kill).
	GracePeriod int64
}

// ShutdownReport says how a node shutdown went. Pods are sorted by group
// (other pods first, then critical pods) and full name.
type ShutdownReport struct {
	// Terminated are the pods known to have no running container when
	// ShutdownNode returned.
	Terminated []ShutdownPod
	// NotTerminated are the pods that could still have running containers.
	// Their termination goes on as long as the pod workers run.
	NotTerminated []ShutdownPod
}

// ErrShutdownBudgetSpent is wrapped by the error ShutdownNode returns when
// its budget ran out before every pod was terminated; the report lists
// them. Test with errors.Is.
var ErrShutdownBudgetSpent = errors.New("lifecycle: node shutdown budget spent before every pod terminated")

const (
	nodeShutdownReason  = "Terminated"
	nodeShutdownMessage = "Pod was terminated in response to imminent node shutdown."
)

// ShutdownNode stops every pod on the node for a node shutdown, in two
// groups: first every pod that is not critical (IsCriticalPod), then the
// critical ones, each group given until its share of opts.GracePeriod runs
// out (see ShutdownOptions). Every pod of a group is killed at once, with
// its grace period capped by the seconds left in its group (and by its own
// spec.terminationGracePeriodSeconds, the smaller wins, at least 1); the
// final status the syncer gets (through the kill's PodStatusFunc) is phase
// Failed (unless Succeeded), reason "Terminated", and a DisruptionTarget
// condition. The critical group starts as soon as the first has terminated
// or its time is up.
//
// From the first call on, the Handler admits no new pod (ReasonNodeShutdown)
// and housekeeping no longer restarts pods. The pods are those the workers
// have that are not yet terminated, pods known only from the runtime
// included (they count as not critical).
//
// Call it from any goroutine, typically on a shutdown signal while Run goes
// on (so removals and housekeeping keep working); it does not stop Run or
// the workers. It blocks until every pod is terminated, the budget is
// spent, or ctx ends, and returns the report with: nil when every pod is
// terminated; an error wrapping ErrShutdownBudgetSpent when the budget ran
// out first; ctx.Err() when ctx ended first; an error wrapping the workers'
// error (podworker.ErrStopped, say) when they refused a kill. Invalid
// options give an error, prefixed "lifecycle: ", and nothing is done.
func (h *Handler) ShutdownNode(ctx context.Context, opts ShutdownOptions) (ShutdownReport, error) {
	switch {
	case opts.GracePeriod <= 0:
		return ShutdownReport{}, fmt.Errorf("lifecycle: ShutdownOptions.GracePeriod is %v; want more than 0", opts.GracePeriod)
	case opts.CriticalGracePeriod < 0 || opts.CriticalGracePeriod > opts.GracePeriod:
		return ShutdownReport{}, fmt.Errorf("lifecycle: ShutdownOptions.CriticalGracePeriod is %v; want 0 to GracePeriod (%v)", opts.CriticalGracePeriod, opts.GracePeriod)
	}
	h.shuttingDown.Store(true)
	start := h.clock.Now()
	deadline := start.Add(opts.GracePeriod)

	var regular, critical []*shutdownPod
	for _, info := range h.workers.Pods() {
		if info.Stage >= podworker.StageTerminated {
			continue
		}
		sp := &shutdownPod{info: info, ShutdownPod: ShutdownPod{UID: info.UID, FullName: info.FullName, Critical: IsCriticalPod(info.Pod)}}
		if sp.Critical {
			critical = append(critical, sp)
		} else {
			regular = append(regular, sp)
		}
	}
	byName := func(a, b *shutdownPod) int { return strings.Compare(a.FullName, b.FullName) }
	slices.SortFunc(regular, byName)
	slices.SortFunc(critical, byName)
	h.log.Info("Shutting down the node's pods", "pods", len(regular), "criticalPods", len(critical), "gracePeriod", opts.GracePeriod, "criticalGracePeriod", opts.CriticalGracePeriod)

	var firstErr error
	err := h.shutdownGroup(ctx, regular, deadline.Add(-opts.CriticalGracePeriod))
	if err == nil {
		err = h.shutdownGroup(ctx, critical, deadline)
	}
	if err != nil {
		firstErr = err
	}

	var report ShutdownReport
	for _, sp := range slices.Concat(regular, critical) {
		if sp.done() {
			report.Terminated = append(report.Terminated, sp.ShutdownPod)
		} else {
			report.NotTerminated = append(report.NotTerminated, sp.ShutdownPod)
		}
		if sp.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("lifecycle: ShutdownNode: killing pod %s: %w", sp.FullName, sp.err)
		}
	}
	if firstErr == nil && len(report.NotTerminated) > 0 {
		firstErr = fmt.Errorf("%w: %d pods may still run after %v", ErrShutdownBudgetSpent, len(report.NotTerminated), opts.GracePeriod)
	}
	h.log.Info("Node shutdown done", "terminated", len(report.Terminated), "notTerminated", len(report.NotTerminated))
	return report, firstErr
}

// shutdownPod is one pod's progress through ShutdownNode.
type shutdownPod struct {
	ShutdownPod
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
func (h *Handler) shutdownGroup(ctx context.Context, pods []*shutdownPod, until time.Time) error {
	if len(pods) == 0 {
		return ctx.Err()
	}
	left := until.Sub(h.clock.Now())
	budget := max(int64(left/time.Second), 1)
	for _, sp := range pods {
		grace := budget
		opts := podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, StartTime: h.clock.Now()}
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
			PodStatusFunc:                            h.shutdownStatus(generation),
		}
		h.log.V(4).Info("Killing pod for node shutdown", "pod", sp.FullName, "podUID", sp.UID, "critical", sp.Critical, "gracePeriod", grace)
		if err := h.workers.UpdatePod(ctx, opts); err != nil {
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
	timer := h.clock.NewTimer(left)
	defer timer.Stop()
	for _, sp := range pods {
		if sp.completed == nil {
			continue
		}
		select {
		case <-sp.completed:
		case <-timer.C():
			h.log.Info("Node shutdown: time is up for a group of pods", "critical", sp.Critical)
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
func (h *Handler) shutdownStatus(generation int64) func(*v1.PodStatus) {
	return func(status *v1.PodStatus) {
		if status.Phase != v1.PodSucceeded {
			status.Phase = v1.PodFailed
		}
		status.Reason = nodeShutdownReason
		status.Message = nodeShutdownMessage
		observed := generation
		if observed == 0 {
			observed = status.ObservedGeneration
		}
		podstatus.SetCondition(status, v1.PodCondition{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: observed,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonTerminationByKubelet,
			Message:            nodeShutdownMessage,
			LastTransitionTime: metav1.NewTime(h.clock.Now()),
		})
	}
}
