package podworker

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// The window's answers and the snapshots, read from the machine. None of
// them changes anything; the driver calls them under its lock.

// question is one of the window's questions, answered by UID: for a UID
// with a record, known says; for a UID without one, unknownBefore before
// the first SyncKnownPods and unknownAfter from then on. The questions
// below are the rows of the package doc's table.
type question struct {
	known                       func(r *record) bool
	unknownBefore, unknownAfter bool
}

var (
	// SyncTerminatingPod succeeded (or the pod never started).
	qKnownTerminated = question{known: func(r *record) bool { return r.has(fTerminated) }}
	// True until termination completes; for an unknown UID, true until
	// synced.
	qCouldHaveRunning = question{known: func(r *record) bool { return !r.has(fTerminated) }, unknownBefore: true}
	// Cleanup ran (or the pod never started).
	qShouldBeFinished = question{known: func(r *record) bool { return r.has(fFinished) }, unknownAfter: true}
	// Termination was requested.
	qTerminationRequested = question{known: func(r *record) bool { return r.has(fTermRequested) }}
	// The worker has begun stopping the containers.
	qContainersTerminating = question{known: func(r *record) bool { return r.has(fTermStarted) }, unknownAfter: true}
	// The containers are known stopped.
	qRuntimeRemovable = question{known: func(r *record) bool { return r.has(fTerminated) }, unknownAfter: true}
	// Evicted, or deleted and terminated.
	qContentRemovable = question{known: func(r *record) bool { return r.has(fEvicted) || (r.has(fDeleted) && r.has(fTerminated)) }, unknownAfter: true}
)

// ask answers q for uid.
func (m *machine) ask(uid types.UID, q *question) bool {
	if r := m.records[uid]; r != nil {
		return q.known(r)
	}
	if m.podsSynced {
		return q.unknownAfter
	}
	return q.unknownBefore
}

// mirrorPodTerminating: the static pod holding fullName is terminating
// (requested, not yet terminated).
func (m *machine) mirrorPodTerminating(fullName string) bool {
	s := m.static[fullName]
	if s == nil || s.holder == nil {
		return false
	}
	return s.holder.has(fTermRequested) && !s.holder.has(fTerminated)
}

// info returns the snapshot of uid's worker; ok is false when there is
// none.
func (m *machine) info(uid types.UID) (PodInfo, bool) {
	r := m.records[uid]
	if r == nil {
		return PodInfo{}, false
	}
	m.resetNow()
	return m.infoOf(r), true
}

// infos returns the snapshots of every worker, in no particular order.
func (m *machine) infos() []PodInfo {
	m.resetNow()
	out := make([]PodInfo, 0, len(m.records))
	for _, r := range m.records {
		out = append(out, m.infoOf(r))
	}
	return out
}

// infoOf builds the public snapshot of r.
func (m *machine) infoOf(r *record) PodInfo {
	info := PodInfo{
		UID:                  r.uid,
		FullName:             r.fullNameOf(),
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
		LastSyncError:        r.lastErr,
		ConsecutiveFailures:  int(r.failures),
	}
	if r.has(fSynced) {
		info.LastSyncTime = m.timeOf(r.lastSync)
	}
	switch {
	case r.has(fRunning), r.has(fFinished):
	case r.has(fQueued):
		info.NextSyncTime = m.timeOf(m.now())
	case r.has(fTimed):
		info.NextSyncTime = m.timeOf(tick(m.delayed.Due(r)))
	}
	info.RuntimeOnly = info.Pod == nil
	if r.has(fTermRequested) {
		info.GracePeriod = r.gracePeriod
	}
	return info
}

// runningHooks names, in no particular order, up to limit of the hooks that
// run now, and counts them all.
func (m *machine) runningHooks(limit int) (names []string, n int) {
	for _, r := range m.records {
		if !r.has(fRunning) {
			continue
		}
		n++
		if len(names) < limit {
			names = append(names, fmt.Sprintf("%s %s (%s)", Hook(r.hook), r.fullNameOf(), r.uid))
		}
	}
	return names, n
}

// staticSlots counts the static full names the machine tracks (for tests:
// none is left once every pod is forgotten).
func (m *machine) staticSlots() int { return len(m.static) }
