package podworker

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestSpawnPolicy checks, under the lock and without running a goroutine,
// whom spawnLocked chooses to wake or start for ready work: a parked
// worker for each ready pod that no worker on its way will take, and a new
// goroutine only when no worker at all is on its way.
func TestSpawnPolicy(t *testing.T) {
	// rig is an engine in the running state with parked workers and ready
	// pods made by hand; nothing it chooses is ever woken or started.
	rig := func(t *testing.T, parked, ready int) *PodWorkers[struct{}] {
		t.Helper()
		w, err := New[struct{}](PodSyncerFuncs[struct{}]{}, Options[struct{}]{})
		require.NoError(t, err)
		w.state = running
		w.cpuWorkers = max(w.cpuWorkers, parked)
		for range parked {
			w.parked = append(w.parked, &worker{wake: make(chan struct{}, 1)})
			w.workers++
		}
		for i := range ready {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i), Namespace: "ns", UID: types.UID(fmt.Sprint(i))}}
			var fx effects
			w.m.update(update{updateType: SyncPodCreate, pod: pod}, killRequest{}, &fx)
			require.True(t, fx.ready)
		}
		require.Equal(t, ready, w.m.readyLen())
		return w
	}
	chosen := func(w *PodWorkers[struct{}]) (wakes int) {
		for p := w.wakeLater; p != nil; p = p.next {
			wakes++
		}
		return wakes
	}

	t.Run("a burst wakes a parked worker per ready pod", func(t *testing.T) {
		w := rig(t, 2, 3)
		w.spawnLocked(0)
		assert.Equal(t, 2, chosen(w), "both parked workers")
		assert.Equal(t, 2, w.woken)
		assert.Empty(t, w.parked)
		assert.False(t, w.spawnLater, "no new goroutine while woken workers are on their way")
	})
	t.Run("one ready pod wakes one worker, the one that parked last", func(t *testing.T) {
		w := rig(t, 2, 1)
		last := w.parked[1]
		w.spawnLocked(0)
		assert.Equal(t, 1, chosen(w))
		assert.Same(t, last, w.wakeLater)
		assert.Len(t, w.parked, 1)
	})
	t.Run("workers that will pop next cover as many ready pods", func(t *testing.T) {
		w := rig(t, 2, 3)
		w.returning.Add(1) // a hook returned; its worker waits for the lock
		w.spawnLocked(1)   // and the caller looks for work next
		assert.Equal(t, 1, chosen(w), "two of three pods are covered: one worker woken for the third")
		w.spawnLocked(1)
		assert.Equal(t, 1, chosen(w), "all three covered: no more")
	})
	t.Run("a goroutine being started does not hold back a parked worker", func(t *testing.T) {
		w := rig(t, 1, 1)
		w.spawning = 1
		w.workers++
		w.spawnLocked(0)
		assert.Equal(t, 1, chosen(w))
		assert.False(t, w.spawnLater)
	})
	t.Run("with no worker on its way and none parked, one goroutine is started", func(t *testing.T) {
		w := rig(t, 0, 3)
		w.spawnLocked(0)
		assert.True(t, w.spawnLater)
		assert.Equal(t, 1, w.spawning)
		assert.Equal(t, 1, w.workers)
		w.spawnLater = false // not started: this test runs no goroutine
		w.spawnLocked(0)
		assert.False(t, w.spawnLater, "one at a time")
		w.wg.Add(-1)
	})
	t.Run("a worker returning from its hook is on its way", func(t *testing.T) {
		w := rig(t, 0, 1)
		w.returning.Add(1)
		w.spawnLocked(0)
		assert.False(t, w.spawnLater)
		assert.Zero(t, chosen(w))
	})
	t.Run("past one worker per CPU, only a stuck worker makes room", func(t *testing.T) {
		w := rig(t, 0, 3)
		w.workers = w.cpuWorkers // each in a hook
		w.spawnLocked(0)
		assert.False(t, w.spawnLater, "the bound holds")
		assert.False(t, w.stallAt.IsZero(), "a stall check is armed")
		assert.Equal(t, uint64(1), w.epoch, "hooks taken from now on are younger than the check")
		w.spawnLocked(0)
		assert.Equal(t, uint64(1), w.epoch, "one check at a time")
		w.stuck = 1 // a check found one blocked
		w.spawnLocked(0)
		assert.True(t, w.spawnLater, "a worker in the stuck one's place")
		w.wg.Add(-1)
	})
	t.Run("the cap holds", func(t *testing.T) {
		w, err := New[struct{}](PodSyncerFuncs[struct{}]{}, Options[struct{}]{MaxConcurrentSyncs: 1})
		require.NoError(t, err)
		w.state = running
		w.workers = 1 // in a hook
		var fx effects
		w.m.update(update{updateType: SyncPodCreate, pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "a"}}}, killRequest{}, &fx)
		w.spawnLocked(0)
		assert.False(t, w.spawnLater)
	})
	t.Run("nothing once Run has returned", func(t *testing.T) {
		w := rig(t, 2, 2)
		w.state = stopped
		w.spawnLocked(0)
		assert.Zero(t, chosen(w))
		assert.False(t, w.spawnLater)
	})
}
