package podworker

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Decorate returns a PodSyncer that adds to inner's hooks: each func set in
// hooks serves its hook in place of inner's, and usually calls inner's
// around work of its own (timing the hook, reporting a status); each nil
// func is inner's hook, called as it is. Unlike in a plain PodSyncerFuncs,
// a nil func here never does nothing: it is inner's.
//
// The result keeps every promise inner makes, the optional ones too. It
// implements RuntimePodSyncer (the only optional interface the engine looks
// for on a syncer) whatever inner is, under ErrNotImplemented's contract:
// its SyncTerminatingRuntimePod is hooks.SyncTerminatingRuntimePodFunc when
// set, else inner's hook when inner implements RuntimePodSyncer, else an
// error wrapping ErrNotImplemented. So the engine stops an orphan through
// the decorator exactly when it could through inner, and fails and retries
// the kill otherwise. A func of hooks that wraps the runtime hook reaches
// inner's with the package function SyncTerminatingRuntimePod(ctx, inner,
// pod), which gives that same error when inner has none (test it with
// errors.Is to skip the decorator's own work then).
//
// Decorators compose: Decorate(Decorate(s, a), b) runs b's funcs around
// a's around s's hooks. The result calls hooks' funcs and inner's hooks on
// the goroutine the engine calls it on, and keeps no state of its own. A
// nil inner has no hooks: each hook that hooks does not serve returns an
// error wrapping ErrNotImplemented.
func Decorate[T any](inner PodSyncer[T], hooks PodSyncerFuncs[T]) Decorated[T] {
	return Decorated[T]{inner: inner, hooks: hooks}
}

// Decorated is a PodSyncer and RuntimePodSyncer made by Decorate. Its zero
// value decorates nothing: every hook returns an error wrapping
// ErrNotImplemented.
type Decorated[T any] struct {
	inner PodSyncer[T]
	hooks PodSyncerFuncs[T]
}

var (
	_ PodSyncer[struct{}] = Decorated[struct{}]{}
	_ RuntimePodSyncer    = Decorated[struct{}]{}
)

var errNoInner = fmt.Errorf("%w: Decorate was given no PodSyncer to decorate", ErrNotImplemented)

// SyncPod calls the SyncPodFunc of the decoration, else the inner syncer's.
func (d Decorated[T]) SyncPod(ctx context.Context, updateType UpdateType, pod, mirrorPod *v1.Pod, status T) (bool, error) {
	switch {
	case d.hooks.SyncPodFunc != nil:
		return d.hooks.SyncPodFunc(ctx, updateType, pod, mirrorPod, status)
	case d.inner == nil:
		return false, errNoInner
	}
	return d.inner.SyncPod(ctx, updateType, pod, mirrorPod, status)
}

// SyncTerminatingPod calls the SyncTerminatingPodFunc of the decoration,
// else the inner syncer's.
func (d Decorated[T]) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, status T, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	switch {
	case d.hooks.SyncTerminatingPodFunc != nil:
		return d.hooks.SyncTerminatingPodFunc(ctx, pod, status, gracePeriod, podStatusFn)
	case d.inner == nil:
		return errNoInner
	}
	return d.inner.SyncTerminatingPod(ctx, pod, status, gracePeriod, podStatusFn)
}

// SyncTerminatedPod calls the SyncTerminatedPodFunc of the decoration, else
// the inner syncer's.
func (d Decorated[T]) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, status T) error {
	switch {
	case d.hooks.SyncTerminatedPodFunc != nil:
		return d.hooks.SyncTerminatedPodFunc(ctx, pod, status)
	case d.inner == nil:
		return errNoInner
	}
	return d.inner.SyncTerminatedPod(ctx, pod, status)
}

// SyncTerminatingRuntimePod calls the SyncTerminatingRuntimePodFunc of the
// decoration, else the inner syncer's hook, else returns an error wrapping
// ErrNotImplemented (see Decorate).
func (d Decorated[T]) SyncTerminatingRuntimePod(ctx context.Context, pod RuntimePod) error {
	if d.hooks.SyncTerminatingRuntimePodFunc != nil {
		return d.hooks.SyncTerminatingRuntimePodFunc(ctx, pod)
	}
	if d.inner == nil {
		return errNoInner
	}
	return SyncTerminatingRuntimePod(ctx, d.inner, pod)
}
