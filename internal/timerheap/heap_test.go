package timerheap

import (
	"math/rand/v2"
	"sort"
	"testing"
)

type item struct {
	id, idx int
}

func (i *item) Index() int     { return i.idx }
func (i *item) SetIndex(n int) { i.idx = n }

// The heap yields its items in due order through pushes, re-timings and
// removals, and keeps every item's index right.
func TestHeapOrdersByDue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Heap[*item]
	want := map[*item]int64{}
	for round := range 2000 {
		switch op := r.IntN(4); {
		case op < 2 || len(want) == 0:
			it := &item{id: round, idx: -1}
			due := r.Int64N(1000)
			h.Push(it, due)
			want[it] = due
		case op == 2:
			for it := range want {
				due := r.Int64N(1000)
				h.Fix(it, due)
				want[it] = due
				break
			}
		default:
			for it := range want {
				h.Remove(it)
				if it.idx != -1 {
					t.Fatalf("a removed item keeps index %d", it.idx)
				}
				delete(want, it)
				break
			}
		}
		if h.Len() != len(want) {
			t.Fatalf("Len %d, want %d", h.Len(), len(want))
		}
		for it, due := range want {
			if got := h.Due(it); got != due {
				t.Fatalf("item %d due %d, want %d", it.id, got, due)
			}
		}
	}
	var dues []int64
	for _, d := range want {
		dues = append(dues, d)
	}
	sort.Slice(dues, func(i, j int) bool { return dues[i] < dues[j] })
	for _, d := range dues {
		_, got, ok := h.Peek()
		if !ok || got != d {
			t.Fatalf("Peek gives %d (%v), want %d", got, ok, d)
		}
		h.Pop()
	}
	if _, ok := h.Pop(); ok {
		t.Fatal("an empty heap popped an item")
	}
}

// Filter removes in bulk and leaves a valid heap with right indexes.
func TestHeapFilter(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h Heap[*item]
	var all []*item
	for i := range 5000 {
		it := &item{id: i, idx: -1}
		h.Push(it, r.Int64N(10000))
		all = append(all, it)
	}
	h.Filter(func(it *item) bool { return it.id%10 == 0 })
	if h.Len() != 500 {
		t.Fatalf("Len %d after Filter, want 500", h.Len())
	}
	for _, it := range all {
		kept := it.id%10 == 0
		if kept != (it.idx >= 0) {
			t.Fatalf("item %d kept %v but index %d", it.id, kept, it.idx)
		}
	}
	if c := cap(h.items); c > 4*500 {
		t.Fatalf("capacity %d kept after a bulk removal to 500", c)
	}
	last := int64(-1)
	for h.Len() > 0 {
		_, due, _ := h.Peek()
		if due < last {
			t.Fatalf("due %d after %d: not a heap", due, last)
		}
		last = due
		h.Pop()
	}
}
