// Package schedule calls a function for each key when the key's time
// comes, on an injected clock, from one goroutine: the timer loop of the
// per-pod loops (probes, active deadlines). A key costs a heap entry and
// no goroutine or timer of its own; one clock timer waits for the key due
// first.
package schedule

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/podkit/podkit/internal/timerheap"
)

// Schedule holds one due time per key. Set, Remove and Due may be called
// from any goroutine, before, during and after Run.
type Schedule[K comparable] struct {
	clock clock.Clock
	epoch time.Time // due times are kept as offsets from it
	wake  chan struct{}

	mu sync.Mutex
	// items and heap hold the same entries: every item of items is in
	// heap, and nothing else is.
	items map[K]*item[K]
	heap  timerheap.Heap[*item[K]]
}

type item[K comparable] struct {
	key K
	due time.Time
	idx int
}

func (it *item[K]) Index() int     { return it.idx }
func (it *item[K]) SetIndex(i int) { it.idx = i }

// New returns an empty Schedule on clk.
func New[K comparable](clk clock.Clock) *Schedule[K] {
	return &Schedule[K]{
		clock: clk,
		epoch: clk.Now(),
		wake:  make(chan struct{}, 1),
		items: make(map[K]*item[K]),
	}
}

// Set makes k due at due, replacing any time k had. A time already past
// is due at once.
func (s *Schedule[K]) Set(k K, due time.Time) {
	s.mu.Lock()
	first := s.heap.Len() == 0
	var firstDue int64
	if !first {
		_, firstDue, _ = s.heap.Peek()
	}
	off := s.offset(due)
	if it, ok := s.items[k]; ok {
		it.due = due
		s.heap.Fix(it, off)
	} else {
		it := &item[K]{key: k, due: due, idx: -1}
		s.items[k] = it
		s.heap.Push(it, off)
	}
	earlier := first || off < firstDue
	s.mu.Unlock()
	if earlier {
		s.poke()
	}
}

// Remove forgets k's time; it does nothing when k has none.
func (s *Schedule[K]) Remove(k K) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it, ok := s.items[k]; ok {
		s.heap.Remove(it)
		delete(s.items, k)
	}
}

// Due returns k's time; ok is false when k has none.
func (s *Schedule[K]) Due(k K) (due time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it, ok := s.items[k]; ok {
		return it.due, true
	}
	return time.Time{}, false
}

// Len returns how many keys have a time.
func (s *Schedule[K]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

// Run calls fire for each key once its time has come, in order of time,
// with the time it was due, until ctx ends; then it returns. A key is
// forgotten just before fire is called for it, so fire may Set it again
// (a period later: see Next). fire runs on Run's goroutine, without the
// Schedule's lock, and must not block: it holds back every other key.
func (s *Schedule[K]) Run(ctx context.Context, fire func(k K, due time.Time)) {
	for {
		now := s.clock.Now()
		nowOff := s.offset(now)
		var due []*item[K]
		s.mu.Lock()
		for {
			it, off, ok := s.heap.Peek()
			if !ok || off > nowOff {
				break
			}
			s.heap.Remove(it)
			delete(s.items, it.key)
			due = append(due, it)
		}
		_, nextOff, waiting := s.heap.Peek()
		s.mu.Unlock()
		if len(due) > 0 {
			for _, it := range due {
				if ctx.Err() != nil {
					return
				}
				fire(it.key, it.due)
			}
			continue // the clock moved on while they fired
		}
		var timer clock.Timer
		var ch <-chan time.Time
		if waiting {
			timer = s.clock.NewTimer(time.Duration(nextOff - nowOff))
			ch = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-ch:
		case <-s.wake:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// poke wakes Run to look at the heap again; it never blocks.
func (s *Schedule[K]) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// offset returns t as nanoseconds from the epoch, saturating (time.Sub
// does) so that a time centuries away stays in order.
func (s *Schedule[K]) offset(t time.Time) int64 {
	return int64(t.Sub(s.epoch))
}

// Next returns the first time after now of the series due, due+period,
// due+2*period, ...: the next tick of a ticker that ticked at due, which
// drops the ticks a late reader missed, as time.Ticker does. A period of
// zero or less gives now.
func Next(due, now time.Time, period time.Duration) time.Time {
	if period <= 0 {
		return now
	}
	next := due.Add(period)
	if next.After(now) {
		return next
	}
	return now.Add(period - now.Sub(due)%period)
}
