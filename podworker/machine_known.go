package podworker

import "k8s.io/apimachinery/pkg/types"

// syncKnown implements SyncKnownPods: it forgets finished workers no longer
// desired (or asked to restart), drives live orphans to termination, and
// reports the workers it keeps.
func (m *machine) syncKnown(desired map[types.UID]struct{}, fx *effects) map[types.UID]WorkerReport {
	m.resetNow()
	m.podsSynced = true
	m.bulk = true
	for uid, r := range m.records {
		_, want := desired[uid]
		if orphan := !want; orphan || r.has(fRestartRequested) {
			m.removeIfDone(r, orphan, fx)
		}
	}
	m.bulk = false
	if m.bulkRemoved > 0 {
		m.delayed.Filter(func(r *record) bool { return !r.has(fForgotten) })
		m.bulkRemoved = 0
	}
	m.dropForgotten()
	out := make(map[types.UID]WorkerReport, len(m.records))
	for uid, r := range m.records {
		_, want := desired[uid]
		out[uid] = WorkerReport{Stage: r.stage(), Orphan: !want, HasConfig: r.knownPod() != nil, Static: r.has(fStatic)}
	}
	return out
}

// dropForgotten takes the records syncKnown forgot out of the records map:
// by building a new map of the rest when under a quarter of its peak is
// left (Go maps never give memory back, so a burst of pods would otherwise
// stay in it; this also catches records removed one by one since), else by
// deleting them.
func (m *machine) dropForgotten() {
	left := len(m.records) - m.bulkForgotten
	forgotten := m.bulkForgotten
	m.bulkForgotten = 0
	if m.peak >= 256 && left < m.peak/4 {
		records := make(map[types.UID]*record, left)
		if left > 0 { // else all went: nothing to look at
			for uid, r := range m.records {
				if !r.has(fForgotten) {
					records[uid] = r
				}
			}
		}
		m.records, m.peak = records, left
		return
	}
	if forgotten > 0 {
		for uid, r := range m.records {
			if r.has(fForgotten) {
				delete(m.records, uid)
			}
		}
	}
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
