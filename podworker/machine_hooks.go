package podworker

import (
	"math"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/mirror"
)

// hookCall is one hook call the machine hands out (next) and takes back
// (complete): which hook, with what.
type hookCall struct {
	rec  *record
	hook Hook
	// ctx is the hook's context. A new one has no values yet (nil): the
	// driver gives it its values before the call.
	ctx *hookCtx
	// updateType, pod and mirror are SyncPod's arguments; pod also the
	// other hooks'.
	updateType  UpdateType
	pod, mirror *v1.Pod
	// runningPod is SyncTerminatingRuntimePod's argument.
	runningPod RuntimePod
	// grace and statusFn are SyncTerminatingPod's.
	grace    int64
	statusFn func(*v1.PodStatus)
	// checkStopped: the pod was first seen terminal; SyncTerminatingPod is
	// skipped when the status shows nothing running (decision D4).
	checkStopped bool
	// startTime is when the update acted on was observed (zero: unknown).
	startTime time.Time
	// lastSync is when the previous hook of the UID returned (zero: none),
	// for StatusSource.PodStatus.
	lastSync time.Time
}

// next takes ready work and returns the hook call to make, or ok false
// when no ready record has a hook to run now.
func (m *machine) next(fx *effects) (c hookCall, ok bool) {
	m.resetNow()
	for {
		r := m.popReady()
		if r == nil {
			return c, false
		}
		if c, ok = m.start(r, fx); ok {
			return c, true
		}
	}
}

// start consumes r's pending update and returns the hook call to make, or
// ok false when there is nothing to run (the pod waits for its static slot,
// or will never start).
func (m *machine) start(r *record, fx *effects) (c hookCall, ok bool) {
	if !r.has(fHasPending) || r.has(fFinished) {
		r.flags &^= fHasPending
		return c, false
	}
	from := r.stage()
	u := r.pending
	runtimeKill := u.pod == nil && r.has(fTermRequested)
	if !runtimeKill && !r.has(fStarted) && !r.has(fStatic) && r.has(fObservedRuntime) && r.has(fTermRequested) && mirror.IsStaticPod(u.pod) {
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
			m.cleanupUnstarted(r, fx)
			m.moved(r, from, fx)
			return c, false
		}
		if !allow {
			// Parked: the slot's release makes it ready again (decision D7).
			return c, false
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

	c = hookCall{
		rec:        r,
		hook:       r.nextHook(),
		updateType: u.updateType,
		pod:        r.pod,
		mirror:     r.mirror,
	}
	if u.startTime != 0 {
		c.startTime = m.timeOf(u.startTime)
	}
	if r.has(fSynced) {
		c.lastSync = m.timeOf(r.lastSync)
	}
	if c.hook == HookSyncTerminatingPod {
		r.flags |= fTermStarted
		if r.gracePeriod == 0 {
			r.gracePeriod, _ = effectiveGrace(0, r.pod, nil)
		}
		c.grace = r.gracePeriod
		c.statusFn = r.statusFn
		c.checkStopped = r.has(fFirstSeenTerminal)
		if r.pod == nil && r.runningPod != nil {
			c.hook = HookSyncTerminatingRuntimePod
			c.runningPod = *r.runningPod
		}
	}
	c.ctx = m.hookContext(r)
	r.flags |= fRunning
	r.hook = uint8(c.hook)
	m.moved(r, from, fx)
	return c, true
}

// hookContext returns r's hook context, making it when needed: the first
// one lives in the record, later ones (after a cancellation) are new. A
// new context has no values: the driver gives it Run's (see hookCall.ctx).
func (m *machine) hookContext(r *record) *hookCtx {
	if r.ctx == nil {
		if !r.has(fCtx0Used) {
			r.flags |= fCtx0Used
			r.ctx = &r.ctx0
		} else {
			r.ctx = new(hookCtx)
		}
	}
	return r.ctx
}

// complete applies the outcome of a hook call next handed out.
func (m *machine) complete(c *hookCall, terminal bool, err error, fx *effects) {
	m.resetNow()
	r := c.rec
	r.flags &^= fRunning | fTimed // a slow-hook watch, if any, ends

	r.lastSync = m.now()
	r.flags |= fSynced
	fx.returned = r.uid
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
	defer m.moved(r, from, fx)

	if err != nil {
		if r.has(fHasPending) {
			// A newer update is waiting: it runs now.
			m.makeReady(r, fx)
			return
		}
		d, given := retryDelayOf(err)
		if given {
			d = min(max(d, 0), m.cfg.maxBackOff)
		} else {
			if r.backoff == 0 {
				r.backoff = tick(m.cfg.backOff)
			} else {
				r.backoff = min(2*r.backoff, tick(m.cfg.maxBackOff))
			}
			d = m.cfg.jitter(time.Duration(r.backoff))
		}
		m.delay(r, m.now().after(d), fx)
		return
	}
	r.backoff = 0

	switch c.hook {
	case HookSyncPod:
		if terminal {
			// The pod finished on its own: stop it (nothing to cancel).
			if !r.has(fTermRequested) {
				r.flags |= fTermRequested
				r.gracePeriod, _ = effectiveGrace(r.gracePeriod, r.pod, nil)
			}
			r.flags |= fTermStarted
			m.requeueLast(r)
			m.makeReady(r, fx)
			return
		}
		if r.has(fHasPending) {
			m.makeReady(r, fx)
		} else if m.cfg.resync > 0 {
			m.delay(r, m.now().after(m.cfg.jitter(m.cfg.resync)), fx)
		}
	case HookSyncTerminatingRuntimePod:
		// Nothing else to clean up for a pod known only from the runtime:
		// it is removed (which closes its channels), and the deferred
		// report says terminating -> absent.
		r.flags |= fTerminated | fFinished
		m.remove(r, fx)
	case HookSyncTerminatingPod:
		r.flags |= fTerminated
		r.flags &^= fFirstSeenTerminal
		m.closeCompleted(r, fx)
		r.statusFn = nil
		m.requeueLast(r)
		m.makeReady(r, fx)
	case HookSyncTerminatedPod:
		r.flags |= fFinished
		r.flags &^= fHasPending
		r.pending = update{}
		m.closeCompleted(r, fx)
		m.cancelHooks(r, fx)
		r.ctx = nil
		m.releaseStatic(r, fx)
	}
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

// fireDue moves every record due by now from the delay heap to a ready
// queue, replaying its last update, and returns the next due time. A
// record whose hook still runs after its context was cancelled is reported
// in fx.slow instead, and due again slowWarning later.
func (m *machine) fireDue(fx *effects) (next time.Time, ok bool) {
	m.resetNow()
	now := m.now()
	for {
		r, due, found := m.delayed.Peek()
		if !found {
			return time.Time{}, false
		}
		if tick(due) > now {
			// A stale entry (its record's timer was cancelled) stays until
			// it is due, or until its record is forgotten: removing it
			// now, as the first of thousands a burst of kills leaves,
			// would cost a heap operation each, where syncKnown drops them
			// in one pass. Its due time is at worst an early wake.
			return m.timeOf(tick(due)), true
		}
		if !r.has(fTimed) {
			m.delayed.Remove(r) // a stale entry, now due
			continue
		}
		if r.has(fRunning) {
			if r.slowWarnings < math.MaxUint16 {
				r.slowWarnings++
			}
			fx.slow = append(fx.slow, slowHook{
				uid:       r.uid,
				fullName:  r.fullNameOf(),
				hook:      Hook(r.hook),
				cancelled: timesSaturating(m.cfg.slowWarning, r.slowWarnings),
				first:     r.slowWarnings == 1,
			})
			if again := tick(due).after(m.cfg.slowWarning); again > tick(due) {
				m.delay(r, again, fx)
			} else {
				// The clock reads the end of time: no later report can be due.
				m.delayed.Remove(r)
				r.flags &^= fTimed
			}
			continue
		}
		m.delayed.Remove(r)
		r.flags &^= fTimed
		m.requeueLast(r)
		if r.has(fHasPending) {
			m.makeReady(r, fx)
		}
	}
}

// timesSaturating returns n times d, or the largest Duration when that
// overflows.
func timesSaturating(d time.Duration, n uint16) time.Duration {
	if n > 0 && d > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}
