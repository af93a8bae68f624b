package podworker

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
)

// flags are the boolean facts of a record, packed to keep idle workers small.
type flags uint32

const (
	// fStarted: the pod was allowed to start (SyncPod may have run).
	fStarted flags = 1 << iota
	// fTermRequested: termination was requested.
	fTermRequested
	// fTermStarted: the worker acted on the termination request; SyncPod
	// never runs again.
	fTermStarted
	// fTerminated: SyncTerminatingPod (or the runtime variant) succeeded, or
	// the pod was found with nothing running.
	fTerminated
	// fFinished: SyncTerminatedPod succeeded, or the pod was never started.
	fFinished
	// fDeleted: the pod was deleted (a deletion timestamp, orphaned, or
	// killed from the runtime). Sticky (decision D3).
	fDeleted
	// fEvicted: a kill asked for eviction. Sticky (decision D3).
	fEvicted
	// fRestartRequested: a Create arrived after termination was requested.
	fRestartRequested
	// fObservedRuntime: a runtime-only kill was seen for this UID.
	fObservedRuntime
	// fFirstSeenTerminal: the pod was in a terminal phase when first seen
	// (decision D4: it may skip SyncTerminatingPod).
	fFirstSeenTerminal
	// fStatic: the pod is a static pod; fullName is set.
	fStatic
	// fHasPending: pending holds an update not yet consumed.
	fHasPending
	// fRunning: the driver runs a hook for this record now (between next
	// and complete).
	fRunning
	// fQueued: the record is in a ready queue.
	fQueued
	// fQueuedTerm: the record's ready queue is the termination queue.
	fQueuedTerm
	// fForgotten: the record was removed from the machine.
	fForgotten
	// fWaiting: a static record is linked in its full name's waiting list.
	fWaiting
	// fSynced: a hook of this record has returned (lastSync is valid).
	fSynced
	// fCtx0Used: ctx0 was handed out; a later context is allocated.
	fCtx0Used
	// fTimed: the record's entry in the delay heap is live (a retry or
	// resync while it is idle, a slow-hook watch while its hook runs).
	// An entry without it is stale, and is dropped when it comes due.
	fTimed
)

// update is one accepted UpdatePod, as kept pending on a record.
type update struct {
	updateType UpdateType
	pod        *v1.Pod
	mirror     *v1.Pod
	runningPod *RuntimePod
	// startTime is when the change was observed, in machine ticks; 0 when
	// unknown.
	startTime tick
}

// record is everything the machine knows about one UID. All fields belong
// to the machine: the driver holds records only to hand them back (in a
// hookCall) and never reads or writes them.
//
// Invariants:
//   - fTerminated implies fTermStarted implies fTermRequested;
//     fFinished implies fTerminated, or that the pod never started.
//   - fQueued iff the record is linked in exactly one ready queue.
//   - heapIdx >= 0 iff the record is in the delay heap. Its entry is live
//     iff fTimed: then the record is idle (not queued, not running) and
//     the entry is its next retry or resync, or its hook runs on after its
//     context was cancelled and the entry is when it is next reported as
//     slow (see machine.cancelHooks). An entry without fTimed is stale:
//     left in place rather than removed when the record got work (a
//     removal from a large heap is most of the cost of an update), reused
//     by the record's next delay, and dropped when it comes due. A
//     forgotten record is never in the heap.
//   - fRunning records are never queued.
//   - a static record is linked in its full name's waiting list (fWaiting)
//     iff it has not started and termination was not requested.
//   - ctx is nil, or the context the record's hooks get until it is
//     cancelled; ctx0 is the record's own storage for its first context.
type record struct {
	uid types.UID
	// fullName is "name_namespace", set for static pods only (their full
	// name keys the static slots); see fullNameOf.
	fullName string
	flags    flags
	// failures counts the hooks that failed in a row.
	failures uint32

	// pending is the newest update not yet consumed (valid when fHasPending).
	pending update

	// The merged desired state the worker last acted on (valid once
	// started, or once a runtime-only termination ran).
	pod        *v1.Pod
	mirror     *v1.Pod
	runningPod *RuntimePod

	// gracePeriod is the effective grace once termination is requested.
	gracePeriod int64
	// completed are the channels to close once no container can run (nil
	// when there are none).
	completed *[]chan<- struct{}
	// statusFn is the newest PodStatusFunc of a kill.
	statusFn func(*v1.PodStatus)

	// lastSync is when the previous hook of this UID returned (valid with
	// fSynced); lastErr is what it returned.
	lastSync tick
	lastErr  error
	// backoff is the delay before the next retry after a failure; 0 when
	// the last hook succeeded (or failed with a delay of its own).
	backoff tick

	// ctx is the context the record's hooks get: nil until a hook needs
	// it, and again after it is cancelled.
	ctx *hookCtx
	// ctx0 is where the record's first context lives, so that a pod whose
	// context is never cancelled costs no allocation for it.
	ctx0 hookCtx

	// hook is the Hook that runs now (valid while fRunning);
	// slowWarnings counts the reports of it as still running after its
	// context was cancelled (saturating). Both are small, so that they and
	// heapIdx share one word.
	hook         uint8
	slowWarnings uint16
	// heapIdx is the record's place in the delay heap, -1 when absent.
	heapIdx int32
	// link holds the record's places in two intrusive lists: a ready
	// queue (readyLink) and a static full name's waiting list (waitLink).
	link [2]links
}

func (r *record) has(f flags) bool { return r.flags&f != 0 }

// stage derives the fine-grained lifecycle position.
func (r *record) stage() Stage {
	switch {
	case r == nil:
		return StageAbsent
	case r.has(fFinished):
		return StageFinished
	case r.has(fTerminated):
		return StageTerminated
	case r.has(fTermStarted):
		return StageTerminating
	case r.has(fTermRequested):
		return StageTerminationRequested
	case r.has(fStarted):
		return StageSyncing
	}
	return StageNotStarted
}

// nextHook is the kind of hook the record runs next: SyncPod until
// termination is requested, SyncTerminatingPod until its containers are
// stopped, SyncTerminatedPod after. (A runtime-only pod's termination hook
// is SyncTerminatingRuntimePod: begin decides that.)
func (r *record) nextHook() Hook {
	switch {
	case r.has(fTerminated) || r.has(fFinished):
		return HookSyncTerminatedPod
	case r.has(fTermRequested):
		return HookSyncTerminatingPod
	}
	return HookSyncPod
}

// Index and SetIndex make a record a timerheap.Item.
func (r *record) Index() int     { return int(r.heapIdx) }
func (r *record) SetIndex(i int) { r.heapIdx = int32(i) }

// knownPod is the pod the worker last acted on, or else the pending one.
func (r *record) knownPod() *v1.Pod {
	if r.pod != nil {
		return r.pod
	}
	if r.has(fHasPending) {
		return r.pending.pod
	}
	return nil
}

func (r *record) knownMirror() *v1.Pod {
	if r.mirror != nil {
		return r.mirror
	}
	if r.has(fHasPending) {
		return r.pending.mirror
	}
	return nil
}

// fullNameOf returns the record's full name, "name_namespace". It is
// stored for static pods and built for the others (a UID's name and
// namespace never change), so only callers that need it pay for the string.
func (r *record) fullNameOf() string {
	if r.fullName != "" {
		return r.fullName
	}
	if p := r.knownPod(); p != nil {
		return mirror.PodFullName(p)
	}
	rp := r.runningPod
	if rp == nil && r.has(fHasPending) {
		rp = r.pending.runningPod
	}
	if rp != nil {
		return mirror.BuildPodFullName(rp.Name, rp.Namespace)
	}
	return ""
}

// addCompleted keeps the non-nil channels of a kill until no container can
// run.
func (r *record) addCompleted(chans []chan<- struct{}) {
	for _, ch := range chans {
		if ch == nil {
			continue
		}
		if r.completed == nil {
			r.completed = new([]chan<- struct{})
		}
		*r.completed = append(*r.completed, ch)
	}
}

// detach forgets ch without closing it (a KillPod whose ctx ended).
func (r *record) detach(ch chan<- struct{}) {
	if r.completed == nil {
		return
	}
	list := *r.completed
	for i, c := range list {
		if c == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		r.completed = nil
	} else {
		*r.completed = list
	}
}
