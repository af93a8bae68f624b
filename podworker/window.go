package podworker

import "k8s.io/apimachinery/pkg/types"

// The window: what every other loop of an agent asks, by UID, instead of
// keeping its own idea of a pod. Each answer is taken under the engine's
// lock and is current at the moment of the call. "Synced" below means
// SyncKnownPods has been called at least once: before that, a UID the
// engine does not know could be a pod that is still running from before
// the agent started.

// ask answers one question of the window under the lock.
func (w *PodWorkers[T]) ask(uid types.UID, q *question) bool {
	w.lock()
	defer w.unlock()
	return w.m.ask(uid, q)
}

// IsPodKnownTerminated reports whether the pod's containers are known to
// be stopped: SyncTerminatingPod succeeded (or the pod never started).
// False for unknown UIDs.
func (w *PodWorkers[T]) IsPodKnownTerminated(uid types.UID) bool {
	return w.ask(uid, &qKnownTerminated)
}

// CouldHaveRunningContainers reports whether the pod may still have
// running containers: true until its termination completes; for an
// unknown UID, true until the engine is synced.
func (w *PodWorkers[T]) CouldHaveRunningContainers(uid types.UID) bool {
	return w.ask(uid, &qCouldHaveRunning)
}

// ShouldPodBeFinished reports whether the pod is done: its cleanup ran (or
// it never started). For an unknown UID: true once the engine is synced.
func (w *PodWorkers[T]) ShouldPodBeFinished(uid types.UID) bool {
	return w.ask(uid, &qShouldBeFinished)
}

// IsPodTerminationRequested reports whether termination of the pod was
// requested (and so SyncPod will not start anything new for it). False for
// unknown UIDs.
func (w *PodWorkers[T]) IsPodTerminationRequested(uid types.UID) bool {
	return w.ask(uid, &qTerminationRequested)
}

// ShouldPodContainersBeTerminating reports whether the worker has begun
// stopping the pod's containers, so no new container may start. For an
// unknown UID: true once the engine is synced.
func (w *PodWorkers[T]) ShouldPodContainersBeTerminating(uid types.UID) bool {
	return w.ask(uid, &qContainersTerminating)
}

// ShouldPodRuntimeBeRemoved reports whether the pod's runtime objects
// (sandbox, stopped containers) may be removed: its containers are known
// stopped. For an unknown UID: true once the engine is synced.
func (w *PodWorkers[T]) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	return w.ask(uid, &qRuntimeRemovable)
}

// ShouldPodContentBeRemoved reports whether the pod's content (volumes,
// directories) may be removed: at once for an evicted pod, once terminated
// for a deleted one, never for a pod that merely finished and is still
// desired. For an unknown UID: true once the engine is synced.
func (w *PodWorkers[T]) ShouldPodContentBeRemoved(uid types.UID) bool {
	return w.ask(uid, &qContentRemovable)
}

// IsPodForMirrorPodTerminatingByFullName reports whether the static pod that
// holds fullName ("name_namespace") is terminating: termination requested
// and not yet terminated. Housekeeping uses it to keep a mirror pod while
// its static pod still stops. False for full names no started static pod
// holds.
func (w *PodWorkers[T]) IsPodForMirrorPodTerminatingByFullName(fullName string) bool {
	w.lock()
	defer w.unlock()
	return w.m.mirrorPodTerminating(fullName)
}
