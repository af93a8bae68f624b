package podworker

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/mirror"
)

// killRequest is the part of KillPodOptions the machine keeps.
type killRequest struct {
	chans    [2]chan<- struct{}
	evict    bool
	statusFn func(*v1.PodStatus)
	override *int64
}

// update records one validated update (UpdatePod). The update's pod (or
// runningPod) is not nil.
func (m *machine) update(u update, k killRequest, fx *effects) {
	m.resetNow()
	runtimeOnly := u.pod == nil
	var uid types.UID
	if runtimeOnly {
		uid = u.runningPod.UID
	} else {
		uid = u.pod.UID
		u.runningPod = nil
	}
	if u.startTime == 0 && m.cfg.stampUpdates {
		u.startTime = m.now()
	}

	r := m.records[uid]
	first := r == nil
	from := StageAbsent
	if first {
		r = m.newRecord(uid, u)
	} else {
		from = r.stage()
	}
	defer m.moved(r, from, fx)

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
		m.keepOrClose(r, k, fx)
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
	case podstatus.IsTerminal(pod.Status.Phase):
		becameTerminating = true
	case u.updateType == SyncPodKill:
		if k.evict {
			r.flags |= fEvicted
		}
		becameTerminating = true
	}
	if becameTerminating {
		r.flags |= fTermRequested
		m.unwaitStatic(r, fx)
	}
	if r.has(fFinished) {
		// Finished implies termination was requested: nothing more runs.
		m.closeAll(r, k.chans[:], fx)
		return
	}

	shortened := false
	switch {
	case r.has(fTerminated):
		m.closeAll(r, k.chans[:], fx)
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

	// Coalescing keeps the oldest known StartTime.
	if r.has(fHasPending) && r.pending.startTime != 0 && (u.startTime == 0 || r.pending.startTime < u.startTime) {
		u.startTime = r.pending.startTime
	}
	if u.mirror == nil && r.has(fHasPending) {
		// A mirror pod, once given, is kept: also through coalescing.
		u.mirror = r.pending.mirror
	}
	r.pending = u
	r.flags |= fHasPending
	m.makeReady(r, fx)

	if becameTerminating || shortened {
		m.cancelHooks(r, fx)
	}
}

// newRecord makes and keeps the record of a UID first seen in u.
func (m *machine) newRecord(uid types.UID, u update) *record {
	r := &record{uid: uid, heapIdx: -1}
	if u.pod != nil {
		if mirror.IsStaticPod(u.pod) {
			r.flags |= fStatic
			r.fullName = mirror.PodFullName(u.pod)
		}
		if podstatus.IsTerminal(u.pod.Status.Phase) {
			r.flags |= fFirstSeenTerminal
		}
	}
	m.records[uid] = r
	m.peak = max(m.peak, len(m.records))
	if r.has(fStatic) {
		m.waitStatic(r)
	}
	return r
}

// nudge asks for the current hook of uid to run again with the newest
// desired state (Resync). It reports false, and changes nothing, for a UID
// the machine does not know or whose worker is finished.
func (m *machine) nudge(uid types.UID, fx *effects) bool {
	m.resetNow()
	r := m.records[uid]
	if r == nil || r.has(fFinished) {
		return false
	}
	if !r.has(fHasPending) {
		m.requeueLast(r)
		if r.has(fHasPending) && m.cfg.stampUpdates {
			r.pending.startTime = m.now()
		}
	}
	if r.has(fHasPending) {
		m.makeReady(r, fx)
	}
	return true
}

// detach forgets ch, a KillPod's own channel, without closing it (the
// KillPod's ctx ended).
func (m *machine) detach(uid types.UID, ch chan<- struct{}) {
	if r := m.records[uid]; r != nil {
		r.detach(ch)
	}
}
