package podworker

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// PodSyncer is what an agent implements: the three phases of a pod's life.
//
// The engine calls the hooks of one UID one at a time, never overlapping, and
// in the order SyncPod*, SyncTerminatingPod+, SyncTerminatedPod+ (a failed
// hook is retried; SyncPod may be skipped entirely for a pod that is
// terminated before it starts). Hooks of different UIDs run concurrently. A
// hook must honour ctx: it is cancelled when the pod's termination starts
// or its grace period shortens (the hook is then called again with the new
// situation) and when Run shuts down. Do not keep ctx past the hook's
// return. A hook that panics is treated as one that failed.
//
// The engine calls SyncPod when the desired pod changes, on a retry, and
// every Options.ResyncInterval. When the runtime changes on its own — a
// container exited, a sandbox died, a probe flipped — the syncer (or
// whatever watches the runtime) reports it with PodWorkers.Resync(uid): the
// pod's current hook then runs again soon with the newest desired state,
// coalesced with anything already pending. There is no need to keep the
// pod around to send it again with UpdatePod.
//
// A hook that cannot do its job at all returns an error wrapping
// ErrNotImplemented (as PodSyncerFuncs does for some nil funcs): like any
// error, it is retried with backoff and shows in PodInfo.LastSyncError.
// Build a PodSyncer from functions with PodSyncerFuncs, and one that adds
// to another's hooks with Decorate.
type PodSyncer[T any] interface {
	// SyncPod makes the pod's running state match pod. It returns terminal
	// true (with a nil error) when the pod has finished on its own (all
	// containers exited under a restart policy that does not restart
	// them); the engine then terminates it. An error means "retry": the
	// engine backs off and calls SyncPod again with the newest pod.
	SyncPod(ctx context.Context, updateType UpdateType, pod, mirrorPod *v1.Pod, status T) (terminal bool, err error)
	// SyncTerminatingPod stops every container of the pod, allowing each
	// gracePeriod seconds to exit: always in [1, MaxGracePeriodSeconds], so
	// time.Duration(gracePeriod)*time.Second does not overflow. It must return nil only
	// when no container of the pod runs; on error it is retried. When ctx
	// is cancelled because the grace period shortened, return promptly: the
	// engine calls it again with the shorter grace. podStatusFn, when not
	// nil, should be applied to the pod's final status.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, status T, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error
	// SyncTerminatedPod releases what the pod still holds (volumes, cgroups,
	// directories). It runs only after SyncTerminatingPod succeeded and is
	// retried until it returns nil; the worker is then finished.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, status T) error
}

// RuntimePodSyncer is an optional interface of a PodSyncer, the only one the
// engine looks for on a syncer. A syncer that implements it can stop pods
// found only in the runtime (killed with a RunningPod update, as
// housekeeping does for orphans).
//
// Without it such kills fail with an error wrapping ErrNotImplemented, are
// retried with backoff, and are logged and shown in PodInfo.LastSyncError
// each time: the pod's containers may still run, so its worker stays
// terminating and CouldHaveRunningContainers stays true. A syncer that
// implements the method but cannot honour it for this syncer (an adapter
// or a decorator whose functions cannot reach such a hook) returns an error
// wrapping ErrNotImplemented from it, and the engine then does exactly the
// same: a syncer may always carry the method, and a Go type does not have
// to tell by its method set what it can do.
type RuntimePodSyncer interface {
	// SyncTerminatingRuntimePod stops every container of the runtime pod,
	// with a grace period of 1 second. It must return nil only when none
	// runs. Called from a worker goroutine, never concurrently for one UID.
	SyncTerminatingRuntimePod(ctx context.Context, pod RuntimePod) error
}

// SyncTerminatingRuntimePod calls s's SyncTerminatingRuntimePod when s
// implements RuntimePodSyncer, and returns an error wrapping
// ErrNotImplemented when it does not. It is how the engine calls the
// optional hook, and how a decorator reaches the hook of the syncer it
// wraps (see Decorate): either way, a syncer without the hook and a hook
// that says it is not implemented come out the same.
func SyncTerminatingRuntimePod[T any](ctx context.Context, s PodSyncer[T], pod RuntimePod) error {
	rs, ok := s.(RuntimePodSyncer)
	if !ok {
		return fmt.Errorf("%w: %T does not implement RuntimePodSyncer", ErrNotImplemented, s)
	}
	return rs.SyncTerminatingRuntimePod(ctx, pod)
}

// Hook names one hook of a PodSyncer or RuntimePodSyncer. The engine's
// logs, its metrics and podworkertest's recordings name hooks with it.
type Hook int

const (
	// HookSyncPod is PodSyncer.SyncPod.
	HookSyncPod Hook = iota + 1
	// HookSyncTerminatingPod is PodSyncer.SyncTerminatingPod.
	HookSyncTerminatingPod
	// HookSyncTerminatedPod is PodSyncer.SyncTerminatedPod.
	HookSyncTerminatedPod
	// HookSyncTerminatingRuntimePod is RuntimePodSyncer.SyncTerminatingRuntimePod.
	HookSyncTerminatingRuntimePod
)

var hookNames = [...]string{"", "SyncPod", "SyncTerminatingPod", "SyncTerminatedPod", "SyncTerminatingRuntimePod"}

// String returns the hook's method name, e.g. "SyncTerminatingPod".
func (h Hook) String() string {
	if h > 0 && int(h) < len(hookNames) {
		return hookNames[h]
	}
	return fmt.Sprintf("Hook(%d)", int(h))
}
