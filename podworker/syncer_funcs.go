package podworker

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// PodSyncerFuncs adapts functions to PodSyncer and RuntimePodSyncer. A nil
// func does what is true of a syncer that has no such function, and never
// reports work it did not do:
//
//   - SyncPodFunc nil: the syncer starts nothing. SyncPod succeeds and
//     reports the pod not terminal.
//   - SyncTerminatingPodFunc nil: with SyncPodFunc nil too, nothing was
//     started, so nothing runs and SyncTerminatingPod succeeds. With
//     SyncPodFunc set, nothing here can stop what it started:
//     SyncTerminatingPod returns an error wrapping ErrNotImplemented, so
//     the pod's termination fails, is retried with backoff, and never
//     reports its containers stopped. A SyncPodFunc that starts nothing (it
//     only records, say) goes with a SyncTerminatingPodFunc that returns
//     nil, which says so.
//   - SyncTerminatedPodFunc nil: there is nothing to release, and
//     SyncTerminatedPod succeeds. Set it when anything SyncPodFunc sets up
//     (volumes, directories, cgroups) outlives the pod's containers.
//   - SyncTerminatingRuntimePodFunc nil: SyncTerminatingRuntimePod returns
//     an error wrapping ErrNotImplemented, never nil. A pod is killed from
//     the runtime because the runtime showed it, and nothing here can stop
//     its containers; the engine treats the error as it treats a syncer
//     without RuntimePodSyncer (the kill fails, is retried with backoff and
//     reported).
//
// To add to the hooks of another syncer, use Decorate: there a nil func is
// the other syncer's hook.
type PodSyncerFuncs[T any] struct {
	SyncPodFunc                   func(ctx context.Context, updateType UpdateType, pod, mirrorPod *v1.Pod, status T) (bool, error)
	SyncTerminatingPodFunc        func(ctx context.Context, pod *v1.Pod, status T, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error
	SyncTerminatedPodFunc         func(ctx context.Context, pod *v1.Pod, status T) error
	SyncTerminatingRuntimePodFunc func(ctx context.Context, pod RuntimePod) error
}

var (
	_ PodSyncer[struct{}] = PodSyncerFuncs[struct{}]{}
	_ RuntimePodSyncer    = PodSyncerFuncs[struct{}]{}
)

// The errors of PodSyncerFuncs' nil funcs that cannot honestly succeed.
var (
	errNothingStops  = fmt.Errorf("%w: PodSyncerFuncs has a SyncPodFunc and no SyncTerminatingPodFunc, so nothing stops what SyncPod started", ErrNotImplemented)
	errNoRuntimeFunc = fmt.Errorf("%w: PodSyncerFuncs has no SyncTerminatingRuntimePodFunc", ErrNotImplemented)
)

// SyncPod calls f.SyncPodFunc; without one it succeeds, not terminal.
func (f PodSyncerFuncs[T]) SyncPod(ctx context.Context, updateType UpdateType, pod, mirrorPod *v1.Pod, status T) (bool, error) {
	if f.SyncPodFunc == nil {
		return false, nil
	}
	return f.SyncPodFunc(ctx, updateType, pod, mirrorPod, status)
}

// SyncTerminatingPod calls f.SyncTerminatingPodFunc. Without one it
// succeeds when f.SyncPodFunc is nil too (nothing was started), and returns
// an error wrapping ErrNotImplemented otherwise.
func (f PodSyncerFuncs[T]) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, status T, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	if f.SyncTerminatingPodFunc == nil {
		if f.SyncPodFunc != nil {
			return errNothingStops
		}
		return nil
	}
	return f.SyncTerminatingPodFunc(ctx, pod, status, gracePeriod, podStatusFn)
}

// SyncTerminatedPod calls f.SyncTerminatedPodFunc; without one it succeeds.
func (f PodSyncerFuncs[T]) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, status T) error {
	if f.SyncTerminatedPodFunc == nil {
		return nil
	}
	return f.SyncTerminatedPodFunc(ctx, pod, status)
}

// SyncTerminatingRuntimePod calls f.SyncTerminatingRuntimePodFunc; without
// one it returns an error wrapping ErrNotImplemented.
func (f PodSyncerFuncs[T]) SyncTerminatingRuntimePod(ctx context.Context, pod RuntimePod) error {
	if f.SyncTerminatingRuntimePodFunc == nil {
		return errNoRuntimeFunc
	}
	return f.SyncTerminatingRuntimePodFunc(ctx, pod)
}
