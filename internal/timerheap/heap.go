// Package timerheap is an intrusive min-heap of items ordered by a due time.
// Items carry their own index so removal and re-timing are O(log n) and need
// no allocation. It has no locks: its owner serializes access.
package timerheap

import "time"

// Item is stored in a Heap. Index must return the value last given to
// SetIndex, or -1 when the item is not in any heap.
type Item interface {
	Due() time.Time
	Index() int
	SetIndex(int)
}

// Heap is a min-heap of items by Due. The zero value is an empty heap.
type Heap[E Item] struct {
	items []E
}

// Len returns the number of items.
func (h *Heap[E]) Len() int { return len(h.items) }

// Peek returns the item due first; ok is false when the heap is empty.
func (h *Heap[E]) Peek() (e E, ok bool) {
	if len(h.items) == 0 {
		return e, false
	}
	return h.items[0], true
}

// Push adds e, which must not be in the heap (Index() == -1).
func (h *Heap[E]) Push(e E) {
	e.SetIndex(len(h.items))
	h.items = append(h.items, e)
	h.up(len(h.items) - 1)
}

// Fix restores order after e's due time changed. e must be in the heap.
func (h *Heap[E]) Fix(e E) {
	i := e.Index()
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
	var zero E
	h.items[last] = zero
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
	e = h.items[0]
	h.Remove(e)
	return e, true
}

// shrink gives memory back once the heap has emptied to a quarter of its
// capacity, so a burst does not pin its peak size forever.
func (h *Heap[E]) shrink() {
	if c := cap(h.items); c > 64 && len(h.items) < c/4 {
		items := make([]E, len(h.items), c/2)
		copy(items, h.items)
		h.items = items
	}
}

func (h *Heap[E]) less(i, j int) bool { return h.items[i].Due().Before(h.items[j].Due()) }

func (h *Heap[E]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].SetIndex(i)
	h.items[j].SetIndex(j)
}

func (h *Heap[E]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
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
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
