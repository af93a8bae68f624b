package podworker

import (
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/internal/jitter"
	"github.com/podkit/podkit/internal/timerheap"
)

// machine is the pod workers' state and every transition of it, with no
// goroutines, locks or hooks: the driver (PodWorkers) serializes calls to it
// and runs the hooks it hands out. Time is always passed in.
//
// Work moves through three places: a record with something to do now is in
// a ready queue (termination work and setup work apart, so the driver can
// prefer termination); a record waiting for a retry or resync is in the
// delay heap; a record whose hook runs is in neither (fRunning).
type machine struct {
	records map[types.UID]*record
	// peak is the most records held since the map was last rebuilt: Go maps
	// never give memory back, so syncKnown rebuilds a map that shrank a lot.
	peak int
	// static maps a static pod's full name to who holds it and who waits.
	static map[string]*staticSlot
	// podsSynced is set by the first SyncKnownPods: from then on an unknown
	// UID is known not to run.
	podsSynced bool

	readyTerm, readySync list
	delayed              timerheap.Heap[*record]
	// earliest is set when the delay heap's first due time moved earlier.
	earliest bool

	resync, backOff, maxBackOff time.Duration
	metrics                     *metrics
	// onMove, when set, is told of every stage change.
	onMove func(r *record, from, to Stage)
	// slowWarning is how long a hook may run after its context was
	// cancelled before it is reported in slowHooks (0: never).
	slowWarning time.Duration
	// slowHooks are the reports the driver logs and clears.
	slowHooks []slowHook
	// reusedChans are the pods whose CompletedCh was found already closed
	// when the machine closed it; the driver reports and clears them.
	reusedChans []podRef

	// clock is read at most once per operation, and only when the
	// operation needs the time (reading it is not free on every machine).
	clock  clock.PassiveClock
	nowAt  time.Time
	nowSet bool
	// stampUpdates: fill in an update's missing StartTime (latency metrics).
	stampUpdates bool
}

// tick starts a new operation: the next now() reads the clock again.
func (m *machine) tick() { m.nowSet = false }

// now returns the time of the current operation.
func (m *machine) now() time.Time {
	if !m.nowSet {
		m.nowAt, m.nowSet = m.clock.Now(), true
	}
	return m.nowAt
}

// staticSlot serializes static pods sharing a full name: one holder at a
// time, the others waiting in arrival order.
type staticSlot struct {
	holder  *record
	waiting list
}

func newStaticSlot() *staticSlot { return &staticSlot{waiting: list{kind: waitLink}} }

// killRequest is the part of KillPodOptions the machine keeps.
type killRequest struct {
	chans    [2]chan<- struct{}
	evict    bool
	statusFn func(*v1.PodStatus)
	override *int64
}

// hookID names the hook a record runs.
type hookID uint8

const (
	hookSyncPod hookID = iota
	hookSyncTerminatingPod
	hookSyncTerminatingRuntimePod
	hookSyncTerminatedPod
)

var hookNames = [...]string{"SyncPod", "SyncTerminatingPod", "SyncTerminatingRuntimePod", "SyncTerminatedPod"}

func (h hookID) String() string { return hookNames[h] }

// hook is the hook w calls.
func (w *work) hook() hookID {
	switch {
	case w.state == Syncing:
		return hookSyncPod
	case w.state == Terminated:
		return hookSyncTerminatedPod
	case w.runtimeOnly:
		return hookSyncTerminatingRuntimePod
	}
	return hookSyncTerminatingPod
}

// work is what one hook call needs, handed from begin to complete.
type work struct {
	state        State
	runtimeOnly  bool
	checkStopped bool
	updateType   UpdateType
	pod, mirror  *v1.Pod
	runningPod   RuntimePod
	grace        int64
	statusFn     func(*v1.PodStatus)
	startTime    time.Time
	lastSync     time.Time
}

func newMachine(clk clock.PassiveClock, resync, backOff, maxBackOff time.Duration, m *metrics) *machine {
	return &machine{
		clock:      clk,
		records:    map[types.UID]*record{},
		static:     map[string]*staticSlot{},
		readyTerm:  list{kind: readyLink},
		readySync:  list{kind: readyLink},
		resync:     resync,
		backOff:    backOff,
		maxBackOff: maxBackOff,
		metrics:    m,
	}
}

func (m *machine) moved(r *record, from Stage) {
	to := r.stage()
	if r.has(fForgotten) {
		to = StageAbsent
	}
	if from == to {
		return
	}
	m.metrics.moved(from, to)
	if m.onMove != nil {
		m.onMove(r, from, to)
	}
}

// apply records one validated update (UpdatePod).
func (m *machine) apply(u update, k killRequest) {
	runtimeOnly := u.pod == nil
	var uid types.UID
	if runtimeOnly {
		uid = u.runningPod.UID
	} else {
		uid = u.pod.UID
		u.runningPod = nil
	}
	if u.startTime.IsZero() && m.stampUpdates {
		u.startTime = m.now()
	}

	r := m.records[uid]
	first := r == nil
	from := StageAbsent
	if first {
		r = &record{uid: uid, heapIdx: -1}
		if runtimeOnly {
			r.fullName = buildFullName(u.runningPod.Name, u.runningPod.Namespace)
		} else {
			r.fullName = buildFullName(u.pod.Name, u.pod.Namespace)
		}
		if !runtimeOnly {
			if isStaticPod(u.pod) {
				r.flags |= fStatic
			}
			if isTerminalPhase(u.pod) {
				r.flags |= fFirstSeenTerminal
			}
		}
		m.records[uid] = r
		m.peak = max(m.peak, len(m.records))
		if r.has(fStatic) {
			m.waitStatic(r)
		}
	} else {
		from = r.stage()
	}
	defer m.moved(r, from)

	pod := u.pod
	if runtimeOnly {
		r.flags |= fObservedRuntime
		if p := r.knownPod(); p != nil {
			// A runtime kill of a pod the worker knows is a kill of that pod.
			u.pod, u.runningPod, pod = p, nil, p
		}
	}

	if !first && r.has(fTermRequested) && u.updateType == SyncPodCreate {
		r.flags |= fRestartRequested
		m.keepOrClose(r, k)
		return
	}
	becameTerminating := false
	switch {
	case r.has(fTermRequested):
		// Decision D3: a later deletion or eviction still counts, also
		// once the pod is finished (ShouldPodContentBeRemoved changes).
		if runtimeOnly || pod.DeletionTimestamp != nil {
			r.flags |= fDeleted
		}
		if u.updateType == SyncPodKill && k.evict {
			r.flags |= fEvicted
		}
	case runtimeOnly, pod.DeletionTimestamp != nil:
		r.flags |= fDeleted
		becameTerminating = true
	case isTerminalPhase(pod):
		becameTerminating = true
	case u.updateType == SyncPodKill:
		if k.evict {
			r.flags |= fEvicted
		}
		becameTerminating = true
	}
	if becameTerminating {
		r.flags |= fTermRequested
		m.unwaitStatic(r)
	}
	if r.has(fFinished) {
		// Finished implies termination was requested: nothing more runs.
		m.closeAll(r, k.chans[:])
		return
	}

	shortened := false
	switch {
	case r.has(fTerminated):
		m.closeAll(r, k.chans[:])
		if runtimeOnly {
			// A stale runtime listing must not rerun cleanup.
			return
		}
	case r.has(fTermRequested):
		r.addCompleted(k.chans[:])
		if k.statusFn != nil {
			r.statusFn = k.statusFn
		}
		r.gracePeriod, shortened = effectiveGrace(r.gracePeriod, pod, k.override)
	default:
		// Decision D2: channels close when no container can run, not before.
		r.addCompleted(k.chans[:])
	}

	if r.has(fHasPending) && r.pending.startTime.Before(u.startTime) {
		u.startTime = r.pending.startTime
	}
	r.pending = u
	r.flags |= fHasPending
	m.makeReady(r)

	if becameTerminating || shortened {
		m.cancelHooks(r)
	}
}

// nudge asks for the current hook of uid to run again with the newest
// desired state (Resync). It reports false, and changes nothing, for a UID
// the machine does not know or whose worker is finished.
func (m *machine) nudge(uid types.UID) bool {
	r := m.records[uid]
	if r == nil || r.has(fFinished) {
		return false
	}
	if !r.has(fHasPending) {
		m.requeueLast(r)
		if r.has(fHasPending) && m.stampUpdates {
			r.pending.startTime = m.now()
		}
	}
	if r.has(fHasPending) {
		m.makeReady(r)
	}
	return true
}

// cancelHooks cancels the context of r's hooks, if it has one; the next hook
// gets a new one. A hook running now is watched: if it is still running
// slowWarning later, fireDue reports it (see slowHook).
func (m *machine) cancelHooks(r *record) {
	if !r.cancelCtx() {
		return
	}
	if r.has(fRunning) && m.slowWarning > 0 && r.heapIdx < 0 {
		r.slowWarnings = 0
		m.delay(r, m.now().Add(m.slowWarning))
	}
}

// cancelCtx cancels r's hook context, if it has one, and forgets it so the
// next hook gets a new one. It reports whether there was one.
func (r *record) cancelCtx() bool {
	if r.ctx == nil {
		return false
	}
	r.ctx.cancel()
	r.ctx = nil
	return true
}

// keepOrClose attaches a request's channels to r, or closes them when r can
// no longer have running containers.
func (m *machine) keepOrClose(r *record, k killRequest) {
	if r.has(fTerminated) || r.has(fFinished) {
		m.closeAll(r, k.chans[:])
		return
	}
	r.addCompleted(k.chans[:])
}

func (r *record) addCompleted(chans []chan<- struct{}) {
	for _, ch := range chans {
		if ch != nil {
			r.completed = append(r.completed, ch)
		}
	}
}

// closeCompleted closes and forgets every channel waiting on r.
func (m *machine) closeCompleted(r *record) {
	m.closeAll(r, r.completed)
	r.completed = nil
}

// detach forgets ch without closing it (a KillPod whose ctx ended).
func (r *record) detach(ch chan<- struct{}) {
	for i, c := range r.completed {
		if c == ch {
			r.completed = append(r.completed[:i], r.completed[i+1:]...)
			if len(r.completed) == 0 {
				r.completed = nil
			}
			return
		}
	}
}

// closeAll closes every non-nil channel of r's kills. A channel that was
// already closed (the caller reused a CompletedCh, or closed it: a contract
// violation) is survived rather than crashing the engine, and noted in
// reusedChans for the driver to report.
func (m *machine) closeAll(r *record, chans []chan<- struct{}) {
	for _, ch := range chans {
		if ch != nil && !closeOnce(ch) {
			m.reusedChans = append(m.reusedChans, podRef{uid: r.uid, fullName: r.fullName})
		}
	}
}

// closeOnce closes ch and reports false when it was closed already.
func closeOnce(ch chan<- struct{}) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	close(ch)
	return true
}

// podRef names a pod in what the machine reports to the driver.
type podRef struct {
	uid      types.UID
	fullName string
}

// makeReady puts r in the ready queue that fits its work, unless its hook
// is running (the driver looks for pending work when the hook returns).
func (m *machine) makeReady(r *record) {
	if r.has(fRunning) {
		return
	}
	if r.heapIdx >= 0 {
		m.delayed.Remove(r)
	}
	terminating := r.state() != Syncing
	if r.has(fQueued) {
		if !terminating || r.has(fQueuedTerm) {
			return
		}
		// Its work turned into termination work: move it to that queue.
		m.readySync.remove(r)
		m.readyTerm.push(r)
		r.flags |= fQueuedTerm
		return
	}
	r.flags |= fQueued
	if terminating {
		r.flags |= fQueuedTerm
		m.readyTerm.push(r)
	} else {
		m.readySync.push(r)
	}
}

func (m *machine) readyLen() int { return m.readyTerm.n + m.readySync.n }

// popReady takes the next record to work on, termination work first.
func (m *machine) popReady() *record {
	r := m.readyTerm.pop()
	if r == nil {
		r = m.readySync.pop()
	}
	if r != nil {
		r.flags &^= fQueued | fQueuedTerm
	}
	return r
}

// unqueue takes r out of whichever ready queue or heap holds it.
func (m *machine) unqueue(r *record) {
	if r.has(fQueuedTerm) {
		m.readyTerm.remove(r)
	} else if r.has(fQueued) {
		m.readySync.remove(r)
	}
	r.flags &^= fQueued | fQueuedTerm
	if r.heapIdx >= 0 {
		m.delayed.Remove(r)
	}
}

// delay schedules r to run again at due.
func (m *machine) delay(r *record, due time.Time) {
	r.due = due
	if r.heapIdx >= 0 {
		m.delayed.Fix(r)
	} else {
		m.delayed.Push(r)
	}
	if first, _ := m.delayed.Peek(); first == r {
		m.earliest = true
	}
}

// fireDue moves every record due by now from the delay heap to a ready
// queue, replaying its last update, and returns the next due time.
func (m *machine) fireDue(now time.Time) (next time.Time, ok bool) {
	for {
		r, found := m.delayed.Peek()
		if !found {
			return time.Time{}, false
		}
		if r.due.After(now) {
			return r.due, true
		}
		m.delayed.Remove(r)
		if r.has(fRunning) {
			// A cancelled hook still runs: report it, and again later.
			r.slowWarnings++
			m.slowHooks = append(m.slowHooks, slowHook{
				podRef:    podRef{uid: r.uid, fullName: r.fullName},
				hook:      r.hook,
				cancelled: time.Duration(r.slowWarnings) * m.slowWarning,
				first:     r.slowWarnings == 1,
			})
			m.delay(r, r.due.Add(m.slowWarning))
			continue
		}
		m.requeueLast(r)
		if r.has(fHasPending) {
			m.makeReady(r)
		}
	}
}

// slowHook is a hook still running slowWarning (or a multiple of it) after
// its context was cancelled, for the driver to report.
type slowHook struct {
	podRef
	hook hookID
	// cancelled is how long ago the hook's context was cancelled.
	cancelled time.Duration
	// first: this is the first report of this hook call.
	first bool
}

// requeueLast replays the last update as a SyncPodSync, unless an update is
// already pending or the worker never acted on one.
func (m *machine) requeueLast(r *record) {
	if r.has(fHasPending) || (r.pod == nil && r.runningPod == nil) {
		return
	}
	r.pending = update{updateType: SyncPodSync, pod: r.pod, mirror: r.mirror, runningPod: r.runningPod}
	r.flags |= fHasPending
}

// begin consumes r's pending update and returns the hook call to make, or
// ok false when there is nothing to run (the pod waits for its static slot,
// or will never start).
func (m *machine) begin(r *record) (w work, ok bool) {
	if !r.has(fHasPending) || r.has(fFinished) {
		r.flags &^= fHasPending
		return w, false
	}
	from := r.stage()
	u := r.pending
	runtimeKill := u.pod == nil && r.has(fTermRequested)
	if !runtimeKill && !r.has(fStarted) && !r.has(fStatic) && r.has(fObservedRuntime) && r.has(fTermRequested) && isStaticPod(u.pod) {
		// The runtime showed this UID's containers before config showed
		// its static pod, and it is being killed. The pod must not start:
		// its full name may belong to another static pod. Stop its
		// containers the way an orphan's are stopped instead, so none leaks.
		runtimeKill = true
		u.runningPod = &RuntimePod{UID: r.uid, Name: u.pod.Name, Namespace: u.pod.Namespace}
		u.pod = nil
	}
	if !r.has(fStarted) && !runtimeKill {
		allow, never := m.allowStart(r)
		if never {
			m.cleanupUnstarted(r)
			m.moved(r, from)
			return w, false
		}
		if !allow {
			// Parked: the slot's release makes it ready again (decision D7).
			return w, false
		}
		r.flags |= fStarted
	}
	r.flags &^= fHasPending
	r.pending = update{}
	if u.pod != nil {
		r.pod = u.pod
	}
	r.runningPod = u.runningPod
	if u.mirror != nil {
		r.mirror = u.mirror
	}

	w = work{
		state:      r.state(),
		updateType: u.updateType,
		pod:        r.pod,
		mirror:     r.mirror,
		startTime:  u.startTime,
		lastSync:   r.lastSync,
	}
	if w.state == Terminating {
		r.flags |= fTermStarted
		if r.gracePeriod == 0 {
			r.gracePeriod, _ = effectiveGrace(0, r.pod, nil)
		}
		w.grace = r.gracePeriod
		w.statusFn = r.statusFn
		w.checkStopped = r.has(fFirstSeenTerminal)
		if r.pod == nil && r.runningPod != nil {
			w.runtimeOnly = true
			w.runningPod = *r.runningPod
		}
	}
	r.flags |= fRunning
	r.hook = w.hook()
	m.moved(r, from)
	return w, true
}

// complete applies the outcome of the hook begin handed out.
func (m *machine) complete(r *record, w work, terminal bool, err error) {
	r.flags &^= fRunning
	if r.heapIdx >= 0 {
		// The hook was watched after its context was cancelled.
		m.delayed.Remove(r)
	}
	r.lastSync = m.now()
	if err != nil {
		r.lastErr = err
		if r.failures < math.MaxUint32 {
			r.failures++
		}
	} else {
		r.lastErr, r.failures = nil, 0
	}
	if r.has(fForgotten) {
		return
	}
	from := r.stage()
	defer func() { m.moved(r, from) }()

	if err != nil {
		m.metrics.retries[w.state].Inc()
		if r.has(fHasPending) {
			// A newer update is waiting: it runs now.
			m.makeReady(r)
			return
		}
		d, given := retryDelayOf(err)
		if given {
			d = min(max(d, 0), m.maxBackOff)
		} else {
			if r.backoff == 0 {
				r.backoff = m.backOff
			} else {
				r.backoff = min(2*r.backoff, m.maxBackOff)
			}
			d = jitter.Up(r.backoff, 0.5)
		}
		m.delay(r, m.now().Add(d))
		return
	}
	r.backoff = 0

	switch w.state {
	case Syncing:
		if terminal {
			// The pod finished on its own: stop it (nothing to cancel).
			if !r.has(fTermRequested) {
				r.flags |= fTermRequested
				r.gracePeriod, _ = effectiveGrace(r.gracePeriod, r.pod, nil)
			}
			r.flags |= fTermStarted
			m.requeueLast(r)
			m.makeReady(r)
			return
		}
		if r.has(fHasPending) {
			m.makeReady(r)
		} else if m.resync > 0 {
			m.delay(r, m.now().Add(jitter.Up(m.resync, 0.5)))
		}
	case Terminating:
		if w.runtimeOnly {
			// Nothing else to clean up for a pod known only from the
			// runtime: it is removed (which closes its channels), and the
			// deferred report says terminating -> absent.
			r.flags |= fTerminated | fFinished
			m.remove(r)
			return
		}
		r.flags |= fTerminated
		r.flags &^= fFirstSeenTerminal
		m.closeCompleted(r)
		r.statusFn = nil
		m.requeueLast(r)
		m.makeReady(r)
	case Terminated:
		r.flags |= fFinished
		r.flags &^= fHasPending
		r.pending = update{}
		m.closeCompleted(r)
		m.cancelHooks(r)
		m.releaseStatic(r)
	}
}

// allowStart decides whether r may start now. Non-static pods always may.
// Static pods take their full name's slot in arrival order; one whose
// termination was requested before it started never starts.
func (m *machine) allowStart(r *record) (allow, never bool) {
	if !r.has(fStatic) {
		return true, false
	}
	if r.has(fTermRequested) {
		return false, true
	}
	s := m.static[r.fullName]
	switch {
	case s == nil:
		s = newStaticSlot()
		m.static[r.fullName] = s
	case s.holder == r:
		return true, false
	case s.holder != nil, s.waiting.head != nil && s.waiting.head != r:
		return false, false
	}
	if r.has(fWaiting) {
		s.unlink(r)
	}
	s.holder = r
	return true, false
}

// cleanupUnstarted finishes a pod that will never start: no hook runs.
func (m *machine) cleanupUnstarted(r *record) {
	r.flags |= fTerminated | fFinished
	if r.pod == nil {
		// Keep the pod it was given: the snapshot (PodInfo.Pod,
		// RuntimeOnly) and SyncKnownPods (HasConfig) still describe it.
		r.pod, r.mirror = r.pending.pod, r.pending.mirror
	}
	r.flags &^= fHasPending
	r.pending = update{}
	m.closeCompleted(r)
	m.releaseStatic(r)
}

// waitStatic appends a new static record to its full name's waiting list.
func (m *machine) waitStatic(r *record) {
	s := m.static[r.fullName]
	if s == nil {
		s = newStaticSlot()
		m.static[r.fullName] = s
	}
	s.waiting.push(r)
	r.flags |= fWaiting
}

func (s *staticSlot) unlink(r *record) {
	s.waiting.remove(r)
	r.flags &^= fWaiting
}

// unwaitStatic takes r out of its waiting list (its termination was
// requested, or it is forgotten) and wakes the next in line if the slot is
// free.
func (m *machine) unwaitStatic(r *record) {
	if !r.has(fWaiting) {
		return
	}
	s := m.static[r.fullName]
	s.unlink(r)
	m.wakeStatic(r.fullName, s)
}

// releaseStatic frees r's slot if it holds it and starts the next waiting
// pod (decision D7).
func (m *machine) releaseStatic(r *record) {
	if !r.has(fStatic) {
		return
	}
	s := m.static[r.fullName]
	if s == nil {
		return
	}
	if r.has(fWaiting) {
		s.unlink(r)
	}
	if s.holder == r {
		s.holder = nil
	}
	m.wakeStatic(r.fullName, s)
}

func (m *machine) wakeStatic(fullName string, s *staticSlot) {
	switch {
	case s.holder != nil:
	case s.waiting.head != nil:
		if next := s.waiting.head; next.has(fHasPending) {
			m.makeReady(next)
		}
	default:
		delete(m.static, fullName)
	}
}

// forget removes r entirely and reports it. r's hook must not be running.
func (m *machine) forget(r *record) {
	from := r.stage()
	m.remove(r)
	m.moved(r, from)
}

// remove takes r out of the engine without reporting the stage change.
func (m *machine) remove(r *record) {
	m.unqueue(r)
	m.releaseStatic(r)
	m.cancelHooks(r)
	m.closeCompleted(r)
	delete(m.records, r.uid)
	r.flags |= fForgotten
}

// syncKnown implements SyncKnownPods.
func (m *machine) syncKnown(desired map[types.UID]struct{}) map[types.UID]PodWorkerSync {
	m.podsSynced = true
	out := make(map[types.UID]PodWorkerSync, len(m.records))
	for uid, r := range m.records {
		_, want := desired[uid]
		orphan := !want
		if (orphan || r.has(fRestartRequested)) && m.removeIfDone(r, orphan) {
			continue
		}
		p := r.knownPod()
		out[uid] = PodWorkerSync{State: r.state(), Orphan: orphan, HasConfig: p != nil, Static: r.has(fStatic)}
	}
	m.shrinkRecords()
	return out
}

// shrinkRecords rebuilds the records map once it holds under a quarter of
// its peak, so that a burst of pods leaves no memory behind once they are
// forgotten.
func (m *machine) shrinkRecords() {
	if m.peak < 256 || len(m.records) >= m.peak/4 {
		return
	}
	records := make(map[types.UID]*record, len(m.records))
	for uid, r := range m.records {
		records[uid] = r
	}
	m.records, m.peak = records, len(records)
}

// removeIfDone forgets r when it is finished or never started, and drives
// a live orphan to termination. It reports whether r was forgotten.
func (m *machine) removeIfDone(r *record, orphan bool) bool {
	if r.has(fFinished) {
		m.forget(r)
		return true
	}
	if !orphan {
		return false
	}
	from := r.stage()
	r.flags |= fDeleted
	switch {
	case !r.has(fStarted) && !r.has(fObservedRuntime) && !r.has(fRunning):
		m.forget(r)
		return true
	case r.has(fStarted) && !r.has(fTermRequested):
		// Decision D9: an orphan stops with its computed grace period.
		r.flags |= fTermRequested
		r.gracePeriod, _ = effectiveGrace(r.gracePeriod, r.pod, nil)
		m.cancelHooks(r)
		m.requeueLast(r)
		m.makeReady(r)
	}
	m.moved(r, from)
	return false
}

func buildFullName(name, namespace string) string { return name + "_" + namespace }

func isTerminalPhase(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// isStaticPod reports whether the pod came from a source other than the
// API server (the kubernetes.io/config.source annotation).
func isStaticPod(pod *v1.Pod) bool {
	src, ok := pod.Annotations["kubernetes.io/config.source"]
	return ok && src != "api"
}
