package podworker

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What the engine says about its workers: SyncKnownPods' WorkerReport and
// the PodInfo snapshots of Pod and Pods.

// WorkerReport is what SyncKnownPods reports for each worker it keeps.
type WorkerReport struct {
	// Stage is where the worker stands.
	Stage Stage
	// Orphan is true when the UID was not among the desired pods.
	Orphan bool
	// HasConfig is true when the worker knows a Pod (false for pods known
	// only from the runtime; true for a static pod that never started,
	// decision D13).
	HasConfig bool
	// Static is true when the worker's pod is a static pod.
	Static bool
}

// PodInfo is a consistent snapshot of one pod worker, taken under the
// engine's lock. The pods it points to are shared and must not be mutated.
type PodInfo struct {
	UID types.UID
	// FullName is "name_namespace", fixed when the worker was created.
	FullName string
	Stage    Stage
	// Started is true once SyncPod was allowed to run (or a non-static pod
	// was admitted straight to termination).
	Started bool
	// TerminationRequested: termination was asked for.
	TerminationRequested bool
	// TerminationStarted: the worker has begun stopping containers; no
	// SyncPod runs again.
	TerminationStarted bool
	// Finished: cleanup succeeded; the worker waits to be forgotten.
	Finished bool
	// Deleted: the pod was deleted (deletion timestamp, orphaned, or
	// runtime-only). Evicted: it was evicted.
	Deleted, Evicted bool
	// RestartRequested: a Create arrived for this UID after its termination
	// was requested; SyncKnownPods will forget the worker once it finishes
	// so the UID can start over.
	RestartRequested bool
	// Static: the pod is a static pod (its config source is not the API).
	Static bool
	// RuntimeOnly: the worker knows the pod only from the runtime.
	RuntimeOnly bool
	// GracePeriod is the effective grace period in seconds once
	// termination is requested, else 0: what SyncTerminatingPod gets, always
	// in [1, MaxGracePeriodSeconds].
	GracePeriod int64
	// Working: a hook is running now or work is queued for the worker.
	Working bool
	// Pod and MirrorPod are the last desired state the worker acted on
	// (before the worker starts: the pending one).
	Pod, MirrorPod *v1.Pod
	// LastSyncTime is when the last hook of the pod returned (by
	// Options.Clock), whichever hook it was and however it ended; zero
	// before the first one returns.
	LastSyncTime time.Time
	// LastSyncError is what that hook returned: nil after a success, the
	// hook's error (or the error a panic or a failed StatusSource turned
	// into) after a failure. It is kept until a hook succeeds.
	LastSyncError error
	// ConsecutiveFailures counts the hooks of the pod that failed in a row
	// (each is retried); 0 after a success.
	ConsecutiveFailures int
	// NextSyncTime is when the engine will next start a hook for the pod of
	// its own accord: the due time of a retry or resync, or the time of the
	// snapshot when work is ready and waits only for a worker. It is zero
	// when nothing is scheduled: a hook runs now (Working says so), resyncs
	// are off and the pod is idle, or the worker is finished.
	NextSyncTime time.Time
}
