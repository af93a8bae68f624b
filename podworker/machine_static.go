package podworker

// Static pods sharing a full name run one at a time, in arrival order (as
// the kubelet does): the first holds the name's slot until its worker is
// finished, and a freed slot starts the next waiting pod at once (decision
// D7). Each operation is O(1).

// staticSlot serializes static pods sharing a full name: one holder at a
// time, the others waiting in arrival order.
type staticSlot struct {
	holder  *record
	waiting list
}

func newStaticSlot() *staticSlot { return &staticSlot{waiting: list{kind: waitLink}} }

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
func (m *machine) cleanupUnstarted(r *record, fx *effects) {
	r.flags |= fTerminated | fFinished
	if r.pod == nil {
		// Keep the pod it was given (decision D13): the snapshot
		// (PodInfo.Pod, RuntimeOnly) and SyncKnownPods (HasConfig) still
		// describe it.
		r.pod, r.mirror = r.pending.pod, r.pending.mirror
	}
	r.flags &^= fHasPending
	r.pending = update{}
	m.closeCompleted(r, fx)
	m.releaseStatic(r, fx)
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
func (m *machine) unwaitStatic(r *record, fx *effects) {
	if !r.has(fWaiting) {
		return
	}
	s := m.static[r.fullName]
	s.unlink(r)
	m.wakeStatic(r.fullName, s, fx)
}

// releaseStatic frees r's slot if it holds it and starts the next waiting
// pod (decision D7).
func (m *machine) releaseStatic(r *record, fx *effects) {
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
	m.wakeStatic(r.fullName, s, fx)
}

func (m *machine) wakeStatic(fullName string, s *staticSlot, fx *effects) {
	switch {
	case s.holder != nil:
	case s.waiting.head != nil:
		if next := s.waiting.head; next.has(fHasPending) {
			m.makeReady(next, fx)
		}
	default:
		delete(m.static, fullName)
	}
}
