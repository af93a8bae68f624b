package podworker

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
	fDeleted
	fEvicted
	fRestartRequested
	// fObservedRuntime: a runtime-only kill was seen for this UID.
	fObservedRuntime
	// fFirstSeenTerminal: the pod was in a terminal phase when first seen
	// (decision D4: it may skip SyncTerminatingPod).
	fFirstSeenTerminal
	fStatic
	// fHasPending: pending holds an update not yet consumed.
	fHasPending
	// fRunning: a worker goroutine runs a hook for this record now.
	fRunning
	// fQueued: the record is in a ready queue.
	fQueued
	// fQueuedTerm: the record's ready queue is the termination queue.
	fQueuedTerm
	// fForgotten: the record was removed from the engine.
	fForgotten
	// fWaiting: a static record is linked in its full name's waiting list.
	fWaiting
)

// update is one accepted UpdatePod, as kept pending on a record.
type update struct {
	updateType UpdateType
	pod        *v1.Pod
	mirror     *v1.Pod
	runningPod *RuntimePod
	startTime  time.Time
}

// record is everything the engine knows about one UID. All fields are
// guarded by the engine's lock, except ctx, which the running hook reads.
//
// Invariants:
//   - fTerminated implies fTermStarted implies fTermRequested;
//     fFinished implies fTerminated, or that the pod never started.
//   - fQueued iff the record is linked in exactly one ready queue.
//   - heapIdx >= 0 iff the record is in the delay heap; a record is never
//     both queued and in the heap.
//   - fRunning records are never queued; one is in the heap only while its
//     hook runs on after its context was cancelled (its due time is then
//     when it is next reported as slow, see machine.cancelHooks).
//   - a static record is linked in its full name's waiting list iff it has
//     not started and termination was not requested.
type record struct {
	uid      types.UID
	fullName string
	flags    flags
	// hook is the hook that runs now (valid while fRunning).
	hook hookID
	// slowWarnings counts the reports of the running hook as still running
	// after its context was cancelled.
	slowWarnings uint8

	// pending is the newest update not yet consumed (valid when fHasPending).
	pending update

	// The merged desired state the worker last acted on (valid once
	// started, or once a runtime-only termination ran).
	pod        *v1.Pod
	mirror     *v1.Pod
	runningPod *RuntimePod

	// gracePeriod is the effective grace once termination is requested.
	gracePeriod int64
	// completed are the channels to close once no container can run.
	completed []chan<- struct{}
	// statusFn is the newest PodStatusFunc of a kill.
	statusFn func(*v1.PodStatus)

	// lastSync is when the previous hook of this UID returned; lastErr is
	// what it returned, and failures how many hooks in a row failed.
	lastSync time.Time
	lastErr  error
	failures uint32
	// backoff is the delay before the next retry after a failure; 0 when
	// the last hook succeeded.
	backoff time.Duration

	// ctx is the context the record's hooks get: nil until a hook needs
	// it, and again after it is cancelled.
	ctx *hookCtx

	// link holds the record's places in two intrusive lists: a ready
	// queue (readyLink) and a static full name's waiting list (waitLink).
	link [2]links
	// heapIdx is the record's place in the delay heap, -1 when absent;
	// due is when it should run again.
	heapIdx int
	due     time.Time
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

// state is the kind of work the record does next.
func (r *record) state() State {
	switch {
	case r.has(fTerminated) || r.has(fFinished):
		return Terminated
	case r.has(fTermRequested):
		return Terminating
	}
	return Syncing
}

// Due, Index and SetIndex make a record a timerheap.Item.
func (r *record) Due() time.Time { return r.due }
func (r *record) Index() int     { return r.heapIdx }
func (r *record) SetIndex(i int) { r.heapIdx = i }

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

// info builds the public snapshot of r; now is read only when r's work is
// ready to run.
func (r *record) info(now func() time.Time) PodInfo {
	info := PodInfo{
		UID:                  r.uid,
		FullName:             r.fullName,
		State:                r.state(),
		Stage:                r.stage(),
		Started:              r.has(fStarted),
		TerminationRequested: r.has(fTermRequested),
		TerminationStarted:   r.has(fTermStarted),
		Finished:             r.has(fFinished),
		Deleted:              r.has(fDeleted),
		Evicted:              r.has(fEvicted),
		RestartRequested:     r.has(fRestartRequested),
		Static:               r.has(fStatic),
		Working:              r.has(fRunning) || r.has(fQueued) || (r.has(fHasPending) && !r.has(fFinished)),
		Pod:                  r.knownPod(),
		MirrorPod:            r.knownMirror(),
		LastSyncTime:         r.lastSync,
		LastSyncError:        r.lastErr,
		ConsecutiveFailures:  int(r.failures),
	}
	switch {
	case r.has(fRunning), r.has(fFinished):
	case r.has(fQueued):
		info.NextSyncTime = now()
	case r.heapIdx >= 0:
		info.NextSyncTime = r.due
	}
	info.RuntimeOnly = info.Pod == nil
	if r.has(fTermRequested) {
		info.GracePeriod = r.gracePeriod
	}
	return info
}

// Which of a record's links a list uses.
const (
	readyLink = iota
	waitLink
)

// links are a record's neighbours in one list.
type links struct{ prev, next *record }

// list is an intrusive FIFO of records, threaded through link[kind]: a
// record can be in one list of each kind at once, and push, remove and pop
// are O(1) with no allocation.
type list struct {
	head, tail *record
	n          int
	kind       int
}

func (l *list) push(r *record) {
	r.link[l.kind] = links{prev: l.tail}
	if l.tail != nil {
		l.tail.link[l.kind].next = r
	} else {
		l.head = r
	}
	l.tail = r
	l.n++
}

func (l *list) remove(r *record) {
	lk := &r.link[l.kind]
	if lk.prev != nil {
		lk.prev.link[l.kind].next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.link[l.kind].prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	*lk = links{}
	l.n--
}

func (l *list) pop() *record {
	r := l.head
	if r != nil {
		l.remove(r)
	}
	return r
}
