// Package timerheap is an intrusive min-heap of items ordered by a due time.
// Items carry their own index so removal and re-timing are O(log n) and need
// no allocation. The due times live in the heap beside the items, so
// ordering reads no item. It has no locks: its owner serializes access.
package timerheap

// Item is stored in a Heap. Index must return the value last given to
// SetIndex, or -1 when the item is not in any heap.
type Item interface {
	Index() int
	SetIndex(int)
}

// entry is one item with its due time, in the owner's unit (nanoseconds
// from an epoch, say).
type entry[E Item] struct {
	due  int64
	item E
}

// Heap is a min-heap of items by due time. The zero value is an empty heap.
type Heap[E Item] struct {
	items []entry[E]
}

// Len returns the number of items.
func (h *Heap[E]) Len() int { return len(h.items) }

// Peek returns the item due first and its due time; ok is false when the
// heap is empty.
func (h *Heap[E]) Peek() (e E, due int64, ok bool) {
	if len(h.items) == 0 {
		return e, 0, false
	}
	return h.items[0].item, h.items[0].due, true
}

// Due returns e's due time; e must be in the heap.
func (h *Heap[E]) Due(e E) int64 { return h.items[e.Index()].due }

// Push adds e, which must not be in the heap (Index() == -1), due at due.
func (h *Heap[E]) Push(e E, due int64) {
	e.SetIndex(len(h.items))
	h.items = append(h.items, entry[E]{due: due, item: e})
	h.up(len(h.items) - 1)
}

// Fix gives e, which must be in the heap, a new due time.
func (h *Heap[E]) Fix(e E, due int64) {
	i := e.Index()
	h.items[i].due = due
	if !h.down(i) {
		h.up(i)
	}
}

// Remove takes e out of the heap; it does nothing when e is not in it.
func (h *Heap[E]) Remove(e E) {
	i := e.Index()
	if i < 0 || i >= len(h.items) {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = entry[E]{}
	h.items = h.items[:last]
	e.SetIndex(-1)
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	h.shrink()
}

// Pop removes and returns the item due first.
func (h *Heap[E]) Pop() (e E, ok bool) {
	if len(h.items) == 0 {
		return e, false
	}
	e = h.items[0].item
	h.Remove(e)
	return e, true
}

// Filter keeps only the items keep approves, in O(n) however many go: a
// bulk removal. Removed items get the index -1.
func (h *Heap[E]) Filter(keep func(E) bool) {
	j := 0
	for _, en := range h.items {
		if keep(en.item) {
			h.items[j] = en
			h.items[j].item.SetIndex(j)
			j++
		} else {
			en.item.SetIndex(-1)
		}
	}
	clear(h.items[j:])
	h.items = h.items[:j]
	for i := j/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	for c := cap(h.items); c > 64 && len(h.items) < c/4; c = cap(h.items) {
		h.shrink()
	}
}

// shrink gives memory back once the heap has emptied to a quarter of its
// capacity, so a burst does not pin its peak size forever.
func (h *Heap[E]) shrink() {
	if c := cap(h.items); c > 64 && len(h.items) < c/4 {
		items := make([]entry[E], len(h.items), c/2)
		copy(items, h.items)
		h.items = items
	}
}

func (h *Heap[E]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].item.SetIndex(i)
	h.items[j].item.SetIndex(j)
}

func (h *Heap[E]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h.items[i].due >= h.items[p].due {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *Heap[E]) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.items[r].due < h.items[l].due {
			j = r
		}
		if h.items[j].due >= h.items[i].due {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
