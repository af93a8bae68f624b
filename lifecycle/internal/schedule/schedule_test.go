package schedule

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fired collects the keys Run fires, in order.
type fired struct {
	mu   sync.Mutex
	keys []string
}

func (f *fired) add(k string) {
	f.mu.Lock()
	f.keys = append(f.keys, k)
	f.mu.Unlock()
}

func (f *fired) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.keys
	f.keys = nil
	return k
}

// run starts s.Run in the bubble and returns a stop func that ends it and
// waits for it.
func run(s *Schedule[string], fire func(string)) (stop func()) {
	f := func(k string, _ time.Time) { fire(k) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx, f)
	}()
	return func() {
		cancel()
		<-done
	}
}

func TestFiresInOrderOfTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		s := New[string](clk)
		var f fired
		stop := run(s, f.add)
		defer stop()

		s.Set("b", t0.Add(2*time.Second))
		s.Set("a", t0.Add(time.Second))
		s.Set("c", t0.Add(3*time.Second))
		synctest.Wait()
		assert.Empty(t, f.take(), "nothing is due yet")

		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"a"}, f.take())

		clk.Step(5 * time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"b", "c"}, f.take())
		assert.Equal(t, 0, s.Len(), "a fired key is forgotten")
	})
}

func TestSetMovesAKeyAndAnEarlierKeyWakesRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		s := New[string](clk)
		var f fired
		stop := run(s, f.add)
		defer stop()

		s.Set("late", t0.Add(time.Hour))
		synctest.Wait()
		// Run now waits an hour; an earlier key must cut that wait short.
		s.Set("soon", t0.Add(time.Second))
		s.Set("late", t0.Add(2*time.Second)) // moved earlier too
		synctest.Wait()
		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"soon"}, f.take())
		clk.Step(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"late"}, f.take())

		s.Set("x", t0.Add(10*time.Second))
		s.Set("x", t0.Add(time.Hour)) // moved later: not at 10s
		clk.Step(10 * time.Second)
		synctest.Wait()
		assert.Empty(t, f.take())
		due, ok := s.Due("x")
		require.True(t, ok)
		assert.Equal(t, t0.Add(time.Hour), due)
	})
}

func TestRemoveAndPastTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		s := New[string](clk)
		var f fired
		stop := run(s, f.add)
		defer stop()

		s.Set("gone", t0.Add(time.Second))
		s.Remove("gone")
		s.Remove("never-set")
		_, ok := s.Due("gone")
		assert.False(t, ok)
		s.Set("past", t0.Add(-time.Hour))
		synctest.Wait()
		assert.Equal(t, []string{"past"}, f.take(), "a time already past is due at once")
		clk.Step(time.Minute)
		synctest.Wait()
		assert.Empty(t, f.take())
	})
}

func TestFireMaySetItsKeyAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		s := New[string](clk)
		var f fired
		var stop func()
		stop = run(s, func(k string) {
			f.add(k)
			s.Set(k, clk.Now().Add(10*time.Second))
		})
		defer stop()
		s.Set("tick", t0)
		for range 3 {
			synctest.Wait()
			clk.Step(10 * time.Second)
		}
		synctest.Wait()
		assert.Equal(t, []string{"tick", "tick", "tick", "tick"}, f.take())
	})
}

func TestRunReturnsWhenCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		s := New[string](clk)
		s.Set("a", t0.Add(time.Hour))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			s.Run(ctx, func(string, time.Time) {})
			close(done)
		}()
		synctest.Wait()
		cancel()
		<-done // the bubble would report a leaked Run
		assert.Equal(t, 1, s.Len(), "keys stay for a later Run")
	})
}

func TestFarFutureStaysInOrder(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	s := New[string](clk)
	s.Set("far", t0.AddDate(300, 0, 0)) // beyond time.Duration's range from the epoch
	s.Set("near", t0.Add(time.Second))
	it, _, ok := s.heap.Peek()
	require.True(t, ok)
	assert.Equal(t, "near", it.key)
}

func TestNext(t *testing.T) {
	p := 10 * time.Second
	for _, tc := range []struct {
		now  time.Duration // after the due time
		want time.Duration
	}{
		{0, 10 * time.Second},
		{3 * time.Second, 10 * time.Second},
		{10 * time.Second, 20 * time.Second}, // a tick exactly now is missed: the next one
		{25 * time.Second, 30 * time.Second},
		{30 * time.Second, 40 * time.Second},
	} {
		assert.Equal(t, t0.Add(tc.want), Next(t0, t0.Add(tc.now), p), "now %v", tc.now)
	}
	assert.Equal(t, t0.Add(time.Minute), Next(t0, t0.Add(time.Minute), 0))
}

func TestFireGetsTheDueTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		s := New[string](clk)
		got := make(chan time.Time, 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Run(ctx, func(_ string, due time.Time) { got <- due })
		}()
		s.Set("a", t0.Add(time.Second))
		synctest.Wait()
		clk.Step(5 * time.Second)
		assert.Equal(t, t0.Add(time.Second), <-got)
		cancel()
		<-done
	})
}
