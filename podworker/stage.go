package podworker

import "fmt"

// Stage is the position of a pod worker in its lifecycle: the one concept
// of where a pod stands (there is no coarser "state"). Stages only ever
// move forward for one UID; a UID whose worker was removed is StageAbsent
// again and starts over if it is updated.
//
// The kubelet's three work types are ranges of stages: its SyncPod work is
// StageNotStarted and StageSyncing (the next hook is SyncPod), its
// TerminatingPod work is StageTerminationRequested and StageTerminating
// (SyncTerminatingPod), its TerminatedPod work is StageTerminated and
// StageFinished (SyncTerminatedPod, then nothing).
type Stage int

const (
	// StageAbsent: the engine has no worker for the UID.
	StageAbsent Stage = iota
	// StageNotStarted: a worker exists but SyncPod has not been allowed to
	// run yet (its first sync is queued, or a static pod waits for its full
	// name to be free).
	StageNotStarted
	// StageSyncing: the pod was started and no termination was requested.
	StageSyncing
	// StageTerminationRequested: termination was requested; the worker has
	// not yet begun to act on it (a SyncPod may still be returning).
	StageTerminationRequested
	// StageTerminating: the worker has begun stopping containers; SyncPod
	// never runs again for this UID.
	StageTerminating
	// StageTerminated: no container runs; cleanup (SyncTerminatedPod) is
	// pending or in progress.
	StageTerminated
	// StageFinished: cleanup succeeded. The worker holds no goroutine and
	// waits for SyncKnownPods to forget it.
	StageFinished
)

var stageNames = [...]string{"absent", "not-started", "syncing", "termination-requested", "terminating", "terminated", "finished"}

// String returns the stage's name in kebab case, e.g. "termination-requested".
func (s Stage) String() string {
	if s >= 0 && int(s) < len(stageNames) {
		return stageNames[s]
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}
