package podworker

import "k8s.io/apimachinery/pkg/types"

// syncKnown implements SyncKnownPods: it forgets finished workers no longer
// desired (or asked to restart), drives live orphans to termination, and
// reports the workers it keeps.
func (m *machine) syncKnown(desired map[types.UID]struct{}, fx *effects) map[types.UID]WorkerReport {
	m.resetNow()
	m.podsSynced = true
	for uid, r := range m.records {
		_, want := desired[uid]
		if orphan := !want; orphan || r.has(fRestartRequested) {
			m.removeIfDone(r, orphan, fx)
		}
	}
	out := make(map[types.UID]WorkerReport, len(m.records))
	for uid, r := range m.records {
		_, want := desired[uid]
		out[uid] = WorkerReport{Stage: r.stage(), Orphan: !want, HasConfig: r.knownPod() != nil, Static: r.has(fStatic)}
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
// a live orphan to termination.
func (m *machine) removeIfDone(r *record, orphan bool, fx *effects) {
	if r.has(fFinished) {
		m.forget(r, fx)
		return
	}
	if !orphan {
		return
	}
	from := r.stage()
	r.flags |= fDeleted
	switch {
	case !r.has(fStarted) && !r.has(fObservedRuntime) && !r.has(fRunning):
		m.forget(r, fx)
		return
	case r.has(fStarted) && !r.has(fTermRequested):
		// Decision D9: an orphan stops with its computed grace period.
		r.flags |= fTermRequested
		r.gracePeriod, _ = effectiveGrace(r.gracePeriod, r.pod, nil)
		m.cancelHooks(r, fx)
		m.requeueLast(r)
		m.makeReady(r, fx)
	}
	m.moved(r, from, fx)
}

// forget removes r entirely and reports it. r's hook must not be running.
func (m *machine) forget(r *record, fx *effects) {
	from := r.stage()
	m.remove(r, fx)
	m.moved(r, from, fx)
}

// remove takes r out of the machine without reporting the stage change:
// its channels are closed and its context cancelled if anyone listens.
func (m *machine) remove(r *record, fx *effects) {
	m.unqueue(r)
	m.releaseStatic(r, fx)
	m.cancelHooks(r, fx)
	r.ctx = nil
	m.closeCompleted(r, fx)
	delete(m.records, r.uid)
	r.flags |= fForgotten
}

// shutdown has the context of every hook that runs, or that anyone
// listens to, cancelled: Run is shutting down. The records stay, so the
// window and the snapshots still answer.
func (m *machine) shutdown(fx *effects) {
	m.resetNow()
	for _, r := range m.records {
		if c := r.ctx; c != nil && (r.has(fRunning) || c.observed()) {
			r.ctx = nil
			fx.cancels.add(c)
		}
	}
}
