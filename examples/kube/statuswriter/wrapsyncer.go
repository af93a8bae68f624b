package statuswriter

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/podworker"
)

// WriteTerminated writes the status recorded for pod to the API server now,
// on the caller's goroutine, with a terminal phase: the caller vouches that
// no container of pod runs any more, so a recorded status that is not
// terminal (or none at all) is written as Failed, as the kubelet's status
// manager does for a pod that terminated. It is what WrapSyncer does before
// cleanup, so a pod's end is in the API server before the runtime forgets
// it, and an agent that restarts right after cannot take the pod for one
// that never ran.
//
// A pod gone from the API server and a static pod without a current mirror
// are not errors (there is nowhere to write). Anything else that keeps the
// write from landing is: the API server's refusal (a pod the Node
// authorizer does not know yet is bound here, a conflict, a timeout) or its
// absence. The caller retries (WrapSyncer fails the hook, which the pod
// workers retry with backoff).
func (w *Writer) WriteTerminated(ctx context.Context, pod *v1.Pod) error {
	if pod == nil || pod.UID == "" {
		return nil
	}
	_, err := w.sync(ctx, pod, syncMode{stopped: true})
	if errors.Is(err, errNoMirror) {
		return nil
	}
	return err
}

// WrapSyncer returns a PodSyncer that runs s's hooks and reports to w:
//
//   - after each SyncPod and SyncTerminatingPod (whether it failed or not)
//     it derives the pod's status with status and records it
//     (SetPodStatus);
//   - when SyncTerminatingPod is given a podStatusFn (a node shutdown or an
//     eviction says why the pod stops), the status is also recorded
//     before the hook runs, with podStatusFn applied, so the API server
//     shows why the pod is being stopped (a DisruptionTarget condition, a
//     reason) while it stops, as the kubelet shows it; every status
//     recorded after that, until the pod is cleaned up, has podStatusFn
//     applied too, so it must be idempotent (lifecycle's are);
//   - before SyncTerminatedPod, which may erase what a status is derived
//     from, it writes the status recorded when the containers stopped
//     (WriteTerminated); if that fails, the hook fails and is retried, so
//     cleanup waits for the API server to know the pod's end.
//
// The result is a podworker.Decorate of s: it stops runtime pods with s's
// own SyncTerminatingRuntimePod when s has one, and fails those kills with
// podworker.ErrNotImplemented, as s would, when it has none.
//
// The status is derived on the hook's goroutine, so it is the status the
// hook left, before the next hook of the same pod can run. It uses the
// hook's ctx without its cancellation, so a hook cancelled by a shortened
// grace period still reports what it did.
func WrapSyncer[T any](s podworker.PodSyncer[T], w *Writer, status PodStatusFunc) podworker.PodSyncer[T] {
	record := func(ctx context.Context, pod *v1.Pod, podStatusFn func(*v1.PodStatus)) {
		if pod == nil {
			return
		}
		st, err := status(context.WithoutCancel(ctx), pod)
		if err != nil {
			logr.FromContextOrDiscard(ctx).V(4).Info("No pod status after sync", "err", err.Error())
			w.Enqueue(pod.UID)
			return
		}
		if podStatusFn != nil {
			podStatusFn(&st)
		}
		w.SetPodStatus(pod, st)
	}
	return podworker.Decorate(s, podworker.PodSyncerFuncs[T]{
		SyncPodFunc: func(ctx context.Context, updateType podworker.UpdateType, pod, mirrorPod *v1.Pod, st T) (bool, error) {
			terminal, err := s.SyncPod(ctx, updateType, pod, mirrorPod, st)
			record(ctx, pod, nil)
			return terminal, err
		},
		SyncTerminatingPodFunc: func(ctx context.Context, pod *v1.Pod, st T, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
			if podStatusFn != nil {
				record(ctx, pod, podStatusFn)
			}
			err := s.SyncTerminatingPod(ctx, pod, st, gracePeriod, podStatusFn)
			record(ctx, pod, podStatusFn)
			return err
		},
		SyncTerminatedPodFunc: func(ctx context.Context, pod *v1.Pod, st T) error {
			if err := w.WriteTerminated(ctx, pod); err != nil {
				return err
			}
			return s.SyncTerminatedPod(ctx, pod, st)
		},
	})
}
