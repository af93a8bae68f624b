package probe

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// instance identifies one run of a container, as the runtime reports it
// in the container's status.
type instance struct {
	id        string
	startedAt time.Time // zero when the runtime does not say
	running   bool
	// final: the run ended and its restart policy starts no other.
	final bool
}

// sameRun reports whether a and b are the same run of a container: the
// same ID and, when both report one, the same start time (a runtime may
// reuse an ID for a restart).
func (a instance) sameRun(b instance) bool {
	if a.id != b.id {
		return false
	}
	return a.startedAt.IsZero() || b.startedAt.IsZero() || a.startedAt.Equal(b.startedAt)
}

// worker is one probe of one container of one pod: what the kubelet's
// probe worker and its results-manager entry hold, as a synchronous state
// with no goroutine, lock or clock (the manager, holding its lock, passes
// the time and applies what the methods decide).
type worker struct {
	typ       Type
	container string
	probe     *v1.Probe // the pod's; read only
	set       settings
	// invalid is why the probe cannot run (it never does then: readiness
	// stays failed, startup unknown, liveness succeeded); nil if valid.
	invalid error

	// hasInst: inst is the container run the results are about.
	hasInst bool
	inst    instance
	// gen changes with every new instance and when the worker stops, so
	// that the result of a check begun before is dropped.
	gen uint64

	result result // the probe's decision for inst
	last   result // the outcome of the last check (success or failure)
	run    int    // how many checks in a row had outcome last
	// onHold: a decision was made that only a new instance can change
	// (liveness failed; startup succeeded or failed): no more checks.
	onHold bool
	// stopped: the pod is terminating and this probe runs no more.
	stopped bool
	// announced (startup only): a status built by UpdatePodStatus has
	// reported inst started. Liveness and readiness wait for it, so that
	// they begin at a point the runtime saw, not at whichever tick came
	// first after the check's goroutine recorded the success.
	announced bool

	// checking: a check of this worker is in flight (its goroutine will
	// call the manager's finish); at most one is.
	checking bool
	// missed: a tick came while checking; the next check is due as soon
	// as the current one finishes (a ticker's one buffered tick).
	missed bool
	// execDone, when not nil, is open while an exec call abandoned at its
	// timeout still runs: no new exec starts beside it.
	execDone <-chan struct{}
}

// newWorker returns a worker for probe p of type t of container c; err is
// p's validation error, or nil.
func newWorker(c *v1.Container, t Type, p *v1.Probe, s settings, err error) *worker {
	return &worker{typ: t, container: c.Name, probe: p, set: s, invalid: err, result: t.initial()}
}

// observe records the container's current run as the runtime reports it.
// A new run resets the results to the type's initial one, or to seed when
// the pod's API status says this very run was already started (startup)
// or ready (readiness): an agent that restarts and adopts running
// containers does not flip them. It reports whether the run is new.
func (w *worker) observe(in instance, seed result) bool {
	if w.hasInst && w.inst.sameRun(in) {
		if w.inst.startedAt.IsZero() {
			w.inst.startedAt = in.startedAt
		}
		w.inst.running, w.inst.final = in.running, in.final
		if !in.running && w.typ == Readiness {
			w.result = resultFailure // a stopped container is not ready
		}
		return false
	}
	w.hasInst, w.inst = true, in
	w.gen++
	w.result = w.typ.initial()
	if seed != resultUnknown {
		w.result = seed
	}
	if !in.running && w.typ == Readiness {
		w.result = resultFailure
	}
	w.last, w.run, w.onHold = resultUnknown, 0, w.typ == Startup && w.result == resultSuccess
	w.announced = false
	return true
}

// forget drops the instance: the container has no run now (it was
// removed, or not created yet).
func (w *worker) forget() {
	if w.hasInst {
		w.hasInst, w.inst = false, instance{}
		w.gen++
		w.result, w.last, w.run, w.onHold = w.typ.initial(), resultUnknown, 0, false
		w.announced = false
	}
}

// due reports whether a check should run now: the probe is valid and
// live, the instance runs, its initial delay has passed, and the startup
// gate allows it (a startup probe runs until the container started; the
// others only once it has). started says whether the container has
// started (its startup probe passed, or it has none).
func (w *worker) due(now time.Time, started bool) bool {
	if w.invalid != nil || w.stopped || w.onHold || !w.hasInst || !w.inst.running {
		return false
	}
	if !w.inst.startedAt.IsZero() && now.Sub(w.inst.startedAt) < w.set.initialDelay {
		return false
	}
	if w.typ == Startup {
		return !started
	}
	return started
}

// record takes the outcome of a check (resultSuccess or resultFailure)
// and reports whether the probe's decision changed. A decision needs
// successThreshold successes or failureThreshold failures in a row.
// Liveness failing, or startup deciding either way, puts the worker on
// hold until a new instance.
func (w *worker) record(outcome result) (changed bool) {
	if outcome == w.last {
		w.run++
	} else {
		w.last, w.run = outcome, 1
	}
	if outcome == resultFailure && w.run < w.set.failureThreshold ||
		outcome == resultSuccess && w.run < w.set.successThreshold {
		return false
	}
	changed = w.result != outcome
	w.result = outcome
	if w.typ == Liveness && outcome == resultFailure || w.typ == Startup {
		w.onHold, w.run = true, 0
	}
	return changed
}

// stop ends a probe of a terminating pod. A liveness
// probe then holds success, so no restart comes of it.
func (w *worker) stop() {
	w.stopped = true
	w.gen++
	if w.typ == Liveness {
		w.result = resultSuccess
	}
}

// live reports whether the probe may still run: it is valid and not
// stopped.
func (w *worker) live() bool { return w.invalid == nil && !w.stopped }

// wantsSync reports whether a change of this worker's decision to r calls
// for a sync of the pod: a liveness failure (the container must be
// killed), any startup decision, any readiness change.
func (w *worker) wantsSync(r result) bool {
	return w.typ != Liveness || r == resultFailure
}
