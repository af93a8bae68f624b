package podworker

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

// readyLen is how many records the ready queues hold.
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

// unqueue takes r out of whichever ready queue or heap holds it, for good.
func (m *machine) unqueue(r *record) {
	if r.has(fQueuedTerm) {
		m.readyTerm.remove(r)
	} else if r.has(fQueued) {
		m.readySync.remove(r)
	}
	r.flags &^= fQueued | fQueuedTerm
	if r.heapIdx >= 0 {
		if m.bulk {
			// syncKnown removes every forgotten record in one pass.
			m.bulkRemoved++
		} else {
			m.delayed.Remove(r)
		}
	}
	r.flags &^= fTimed
}
