package podworker

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// UpdateType says why UpdatePod was called. It is passed through to
// PodSyncer.SyncPod so a syncer can tell a first start from a later change.
type UpdateType int

const (
	// SyncPodSync is a periodic or replayed sync: nothing new was observed.
	// The engine's own resyncs and retries always use it.
	SyncPodSync UpdateType = iota
	// SyncPodUpdate is a change to the desired pod.
	SyncPodUpdate
	// SyncPodCreate is the first time the pod is seen. A Create for a UID
	// whose termination was already requested marks the worker
	// RestartRequested instead (see SyncKnownPods).
	SyncPodCreate
	// SyncPodKill asks for the pod's containers to be stopped. It always
	// starts termination.
	SyncPodKill
)

// String returns "sync", "update", "create" or "kill".
func (t UpdateType) String() string {
	switch t {
	case SyncPodSync:
		return "sync"
	case SyncPodUpdate:
		return "update"
	case SyncPodCreate:
		return "create"
	case SyncPodKill:
		return "kill"
	}
	return fmt.Sprintf("UpdateType(%d)", int(t))
}

func (t UpdateType) valid() bool { return t >= SyncPodSync && t <= SyncPodKill }

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

// RuntimePod identifies a pod that was found in the runtime but is no longer
// known to configuration (an orphan). It is only ever killed.
type RuntimePod struct {
	UID       types.UID
	Namespace string
	Name      string
}

// KillPodOptions are the options of a kill, given with a SyncPodKill update
// or to KillPod.
type KillPodOptions struct {
	// CompletedCh, when not nil, is closed by the engine exactly once, when
	// the pod can no longer have running containers: after
	// SyncTerminatingPod succeeds, at once if that is already so (the pod is
	// terminated, finished, or was never started), or when its worker is
	// removed before it started.
	//
	// The contract: from the moment it is handed over, the engine owns
	// closing the channel. Make a new channel for every kill; do not close
	// it yourself, and do not hand the same channel to a second update (of
	// the same pod or another), even once it is closed. A violation cannot
	// crash the engine: the second close is skipped and logged at level 0,
	// as an error naming the pod's UID and full name.
	CompletedCh chan<- struct{}
	// Evict marks the termination as an eviction: the window then allows the
	// pod's content to be removed at once (ShouldPodContentBeRemoved). It
	// is sticky: once set for a UID it stays set.
	Evict bool
	// PodStatusFunc, when not nil, is handed to SyncTerminatingPod so the
	// syncer can adjust the pod's final status (a reason, a message). The
	// last one given wins.
	PodStatusFunc func(*v1.PodStatus)
	// PodTerminationGracePeriodSecondsOverride, when not nil, is a grace
	// period in seconds to use instead of the pod's. It can only shorten the
	// effective grace period. Like every grace period the engine reads, a
	// value below 1 (0 or negative) means 1 and one above
	// MaxGracePeriodSeconds means MaxGracePeriodSeconds. The engine never
	// writes to it (decision D14; read the effective value with Pod).
	PodTerminationGracePeriodSecondsOverride *int64
}

// UpdatePodOptions is one desired-state update for a pod worker.
type UpdatePodOptions struct {
	// UpdateType says why the update was made.
	UpdateType UpdateType
	// StartTime, when not zero, is when the change was observed; it feeds
	// the UpdatePod-to-hook latency metric. When updates coalesce the
	// oldest StartTime is kept.
	StartTime time.Time
	// Pod is the desired pod. It is required unless RunningPod is set. The
	// engine keeps the pointer and never mutates the pod: do not mutate it
	// after handing it over, send a new object instead.
	Pod *v1.Pod
	// MirrorPod is the mirror pod of a static Pod, if known. It must have
	// the same full name as Pod. Once given it is kept until another one is.
	MirrorPod *v1.Pod
	// RunningPod names a pod found only in the runtime. It is valid only with
	// SyncPodKill and no Pod; when Pod is set it is ignored.
	RunningPod *RuntimePod
	// KillPodOptions are the options of a kill (see KillPodOptions).
	KillPodOptions *KillPodOptions
}

// StatusSource gives the hooks the pod's runtime status. It is optional:
// without one the hooks get the zero T.
type StatusSource[T any] interface {
	// PodStatus returns the runtime status of the pod with this UID, at least
	// as new as newerThan (the end of the previous hook of this UID; zero
	// for the first). It may block until such a status exists, but must
	// return when ctx ends. Called from worker goroutines, concurrently for
	// different UIDs. An error fails the sync (it is retried with backoff).
	PodStatus(ctx context.Context, uid types.UID, newerThan time.Time) (T, error)
}

// StoppedChecker is an optional interface of a StatusSource. When a pod is
// first seen already in a terminal phase (Succeeded or Failed) — as after an
// agent restart — the engine asks it whether the status positively shows
// that nothing of the pod runs. Only then does the pod skip
// SyncTerminatingPod and go straight to SyncTerminatedPod; otherwise it
// takes the safe path through SyncTerminatingPod.
type StoppedChecker[T any] interface {
	// NothingRunning reports whether status shows no running container and
	// no ready sandbox. It must not block.
	NothingRunning(status T) bool
}

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
