// Package deadline enforces pods' spec.activeDeadlineSeconds as the
// kubelet's active deadline handler does (pkg/kubelet/active_deadline.go):
// a pod that has been active on the node longer than its deadline,
// counted from its status.startTime, is stopped and ends Failed with
// reason DeadlineExceeded and the message "Pod was active on the node
// longer than the specified deadline".
//
// The kubelet decides this while it builds a pod's status (its
// ShouldEvict), with the newest pod it has, and polls every second for
// pods to sync. podkit keeps the decision where the kubelet has it and
// replaces the polling with a timer per pod: Check answers from the pod it
// is given and arms the pod's timer on the injected clock for the moment
// its deadline passes; the timer asks for a sync of that pod
// (RequestSync), and the sync's Check answers true. Deciding in the sync,
// not in the timer, keeps the deadline honest when the spec changes: a
// deadline shortened on a running pod (the API server allows only that)
// re-arms the timer at the next sync, which the change itself brings, and
// no stale copy of the pod is ever used to kill it.
//
// # Usage
//
//  1. An agent makes one Manager with the pod workers as its window:
//     New(podWorkers, Options{RequestSync: agent.RequestSync, Recorder:
//     ..., Clock: ...}), and runs it: go m.Run(ctx).
//  2. The runtime's SyncPod, before starting anything, calls
//     Check(pod, status.StartTime) with the start time it reports for the
//     pod (set on the pod's first sync, as the kubelet's). When it is
//     true, the runtime sets the status with MarkFailed, reports it, and
//     returns terminal: the pod workers then stop the pod, with its grace
//     period.
//  3. Every status the runtime builds for the pod afterwards
//     (SyncTerminatingPod's) goes through Check and MarkFailed again, so
//     the final status keeps the reason.
//  4. SyncTerminatedPod calls Forget(uid).
//
// # How a runtime uses it
//
// The process runtime and the CRI syncer use it alike: it needs the pod
// and its start time, nothing of the runtime.
//
// # Concurrency
//
// Every method is safe for concurrent use. One goroutine (Run) serves
// every pod's timer: a pod costs a heap entry, no goroutine or timer of
// its own. The lock is never held while the window, RequestSync or the
// Recorder run; a panic in a callback is recovered and logged. A timer
// firing for a pod the window says has stopped (or that it does not know)
// drops the pod; while a pod past its deadline runs on, its sync is asked
// for again every RetryInterval.
//
// # Where it differs from the kubelet
//
//   - Timers, not a one-second poll of every pod: a pod is synced when its
//     deadline passes, not up to a second later.
//   - The DeadlineExceeded event is recorded once per pod (the kubelet's
//     records one at every status it builds for the pod past its deadline,
//     which its event recorder then aggregates).
//   - A deadline above about 100 years is never reached (the kubelet's
//     arithmetic would overflow for the largest values).
package deadline
