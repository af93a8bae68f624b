package lifecycle

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// PodUpdater is how the SyncLoop hands desired state to the pod workers.
// *podworker.PodWorkers[T] implements it; see that type for the full
// contract. Both methods are called from the SyncLoop's callers' goroutines
// and must be safe for concurrent use.
type PodUpdater interface {
	// UpdatePod records a desired state for a pod and returns without
	// waiting for hooks. An error means nothing was recorded.
	UpdatePod(ctx context.Context, opts podworker.UpdatePodOptions) error
	// SyncKnownPods tells the workers which pods are desired and reports
	// every worker kept.
	SyncKnownPods(desired []*v1.Pod) map[types.UID]podworker.WorkerReport
}

// PodWindow is the part of the pod workers' window the SyncLoop asks, by UID
// or full name. *podworker.PodWorkers[T] implements it. The methods must be
// safe for concurrent use and must not block.
type PodWindow interface {
	// IsPodKnownTerminated: the pod's containers are known stopped (its
	// resources no longer count as in use).
	IsPodKnownTerminated(uid types.UID) bool
	// IsPodTerminationRequested: the pod is being stopped, so it is not
	// admitted again and a Create for it means a restart after it.
	IsPodTerminationRequested(uid types.UID) bool
	// IsPodForMirrorPodTerminatingByFullName: the static pod holding
	// fullName is still stopping, so its mirror pod is kept.
	IsPodForMirrorPodTerminatingByFullName(fullName string) bool
}

// PodSnapshotter gives snapshots of the pod workers. *podworker.PodWorkers[T]
// implements it. Housekeeping reads one worker to know whether a static pod
// has started (its mirror pod is kept only then). The methods must be safe
// for concurrent use and must not block.
type PodSnapshotter interface {
	// Pod returns a snapshot of the worker of uid; false when there is
	// none.
	Pod(uid types.UID) (podworker.PodInfo, bool)
	// Pods returns a snapshot of every worker; the slice is the caller's.
	Pods() []podworker.PodInfo
}

// WorkerRunner runs the pod workers. *podworker.PodWorkers[T] implements
// it. SyncLoop.Run calls Run once, on a goroutine of its own, with a context
// it cancels when its loop stops; Run must block until that context ends
// and every hook it started has returned, and return an error at once if
// it cannot run (already running, or stopped).
type WorkerRunner interface {
	Run(ctx context.Context) error
}

// Workers is everything the SyncLoop needs from the pod workers, made of
// the four role interfaces above: it runs them (SyncLoop.Run owns their
// lifetime), hands them desired state, asks their window and reads their
// snapshots. The name is not podworker.PodWorkers, the engine itself, but
// what the SyncLoop asks of it. *podworker.PodWorkers[T] implements it for
// every T; an agent may wrap one (to trace calls, say) or substitute its
// own.
type Workers interface {
	WorkerRunner
	PodUpdater
	PodWindow
	PodSnapshotter
}

var _ Workers = (*podworker.PodWorkers[struct{}])(nil)

// errNotDelivered stands for an update send refused and logged.
var errNotDelivered = errors.New("lifecycle: the pod workers refused the update")

// send hands opts to the workers and reports whether they took it. A
// refusal is logged: at V(4) when the workers or the loop are stopping, as
// an error otherwise.
func (l *SyncLoop) send(ctx context.Context, opts podworker.UpdatePodOptions) bool {
	err := l.workers.UpdatePod(ctx, opts)
	if err == nil {
		return true
	}
	var name string
	var uid types.UID
	if opts.Pod != nil {
		name, uid = mirror.PodFullName(opts.Pod), opts.Pod.UID
	} else if opts.RunningPod != nil {
		name, uid = mirror.BuildPodFullName(opts.RunningPod.Name, opts.RunningPod.Namespace), opts.RunningPod.UID
	}
	switch {
	case errors.Is(err, podworker.ErrStopped), ctx.Err() != nil:
		l.log.V(4).Info("Pod update not delivered: the pod workers or the loop stopped", "pod", name, "podUID", uid, "updateType", opts.UpdateType.String(), "err", err.Error())
	default:
		l.log.Error(err, "Pod workers refused an update", "pod", name, "podUID", uid, "updateType", opts.UpdateType.String())
	}
	return false
}
