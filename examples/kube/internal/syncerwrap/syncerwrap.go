// Package syncerwrap turns the hooks of a syncer that wraps another one
// (to time it, or to report statuses) into a podworker.PodSyncer that
// keeps the wrapped syncer's optional capability: the engine finds the
// runtime-pod hook by type assertion, and PodSyncerFuncs always has that
// method, so returning the funcs as they are would claim a capability the
// wrapped syncer lacks.
package syncerwrap

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/podworker"
)

// As returns hooks as a PodSyncer that is a podworker.RuntimePodSyncer
// exactly when inner is one. When it is, hooks.SyncTerminatingRuntimePodFunc
// serves that hook, or inner's own when the field is nil. The result calls
// hooks' functions on the engine's goroutines, as the engine calls it.
func As[T any](inner podworker.PodSyncer[T], hooks podworker.PodSyncerFuncs[T]) podworker.PodSyncer[T] {
	rs, ok := inner.(podworker.RuntimePodSyncer)
	if !ok {
		return withoutRuntimeHook[T]{hooks}
	}
	if hooks.SyncTerminatingRuntimePodFunc == nil {
		hooks.SyncTerminatingRuntimePodFunc = rs.SyncTerminatingRuntimePod
	}
	return hooks
}

// withoutRuntimeHook is PodSyncerFuncs without its runtime-pod method.
type withoutRuntimeHook[T any] struct{ f podworker.PodSyncerFuncs[T] }

func (s withoutRuntimeHook[T]) SyncPod(ctx context.Context, updateType podworker.UpdateType, pod, mirrorPod *v1.Pod, st T) (bool, error) {
	return s.f.SyncPod(ctx, updateType, pod, mirrorPod, st)
}

func (s withoutRuntimeHook[T]) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, st T, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	return s.f.SyncTerminatingPod(ctx, pod, st, gracePeriod, podStatusFn)
}

func (s withoutRuntimeHook[T]) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, st T) error {
	return s.f.SyncTerminatedPod(ctx, pod, st)
}
