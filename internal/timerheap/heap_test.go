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
