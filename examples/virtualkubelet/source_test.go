package virtualkubelet

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// slowSink records when each snapshot began and takes cost to take one.
type slowSink struct {
	cost time.Duration
	mu   sync.Mutex
	at   []time.Duration
	t0   time.Time
}

func (s *slowSink) SetPods(context.Context, string, []*v1.Pod) error {
	s.mu.Lock()
	s.at = append(s.at, time.Since(s.t0))
	s.mu.Unlock()
	time.Sleep(s.cost) // the snapshot's cost, in the bubble's time
	return nil
}

func (s *slowSink) began() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.at...)
}

// A snapshot that took d is followed by the next no sooner than
// snapshotPacing*d after it ended, however many changes came meanwhile
// (they go out together); a change after that wait is sent at once.
func TestSourcePacesSnapshots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Provider{entries: map[types.UID]*entry{}, changed: make(chan struct{}, 1), opts: Options{Clock: clock.RealClock{}}}
		const cost = 10 * time.Millisecond
		sink := &slowSink{cost: cost, t0: time.Now()}
		change := func() {
			p.mu.Lock()
			p.changedLocked()
			p.mu.Unlock()
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- apiSource{p: p}.Run(ctx, sink) }()
		synctest.Wait()
		require.Equal(t, []time.Duration{0}, sink.began(), "the first snapshot goes out at once")

		// Changes from the end of the first snapshot (10ms) on wait until
		// 10ms + 4*10ms.
		time.Sleep(cost)
		change()
		time.Sleep(20 * time.Millisecond)
		change()
		time.Sleep(20*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		assert.Len(t, sink.began(), 1, "no snapshot within the pacing wait")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		want := []time.Duration{0, cost + snapshotPacing*cost}
		require.Equal(t, want, sink.began(), "the changes of the wait go out in one snapshot at its end")

		// A change long after the last snapshot ended goes out at once.
		time.Sleep(time.Second)
		change()
		synctest.Wait()
		want = append(want, want[1]+time.Second)
		require.Equal(t, want, sink.began())

		cancel()
		require.NoError(t, <-done)
	})
}
