package podworker

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// The handoff (handoff.go): an UpdatePod that finds the lock taken hands
// its update to the holder rather than wait. These tests hold the lock
// themselves, as a busy engine would, to make the handoff happen when they
// want it.

func TestHandoff(t *testing.T) {
	t.Run("updates made while the lock is held are applied in their order when it is let go", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			v := &versions{}
			w, _ := startEngine(t, v, Options[struct{}]{})
			synctest.Wait()
			w.mu.Lock()
			require.NoError(t, w.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: SyncPodCreate, Pod: versionedPod("a", 1)}))
			require.NoError(t, w.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: versionedPod("a", 2)}))
			assert.EqualValues(t, 2, w.handed.n.Load(), "both handed over, neither waited")
			w.unlock()
			synctest.Wait()
			assert.Equal(t, []string{"2"}, v.of("a"), "applied oldest first, in one batch: the newest is what SyncPod sees")
			assert.Nil(t, w.handed.top.Load())
			assert.Zero(t, w.handed.n.Load())
		})
	})
	t.Run("the next taker of the lock applies them before it reads", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			v := &versions{}
			w, _ := startEngine(t, v, Options[struct{}]{})
			synctest.Wait()
			w.mu.Lock()
			require.NoError(t, w.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: SyncPodCreate, Pod: versionedPod("a", 1)}))
			w.mu.Unlock() // let go without applying them, as a holder that a handoff just missed
			info, ok := w.Pod("a")
			require.True(t, ok, "the caller's next call sees its update")
			assert.Equal(t, types.UID("a"), info.UID)
			synctest.Wait()
			assert.Equal(t, []string{"1"}, v.of("a"))
		})
	})
	t.Run("beyond maxHanded a caller waits for the lock", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			v := &versions{}
			w, _ := startEngine(t, v, Options[struct{}]{})
			synctest.Wait()
			w.mu.Lock()
			for i := range maxHanded {
				require.NoError(t, w.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: SyncPodCreate, Pod: versionedPod(fmt.Sprint(i), 1)}))
			}
			handed, err := w.handOver(update{updateType: SyncPodCreate, pod: versionedPod("over", 1)}, killRequest{})
			require.NoError(t, err)
			require.False(t, handed, "the stack is full")
			waited := make(chan error)
			go func() {
				waited <- w.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: SyncPodCreate, Pod: versionedPod("over", 1)})
			}()
			w.unlock()
			require.NoError(t, <-waited)
			synctest.Wait()
			assert.Len(t, w.Pods(), maxHanded+1)
			assert.Equal(t, []string{"1"}, v.of("over"))
		})
	})
	t.Run("after Run has returned a handed update is refused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			v := &versions{}
			w, stop := startEngine(t, v, Options[struct{}]{})
			stop()
			w.mu.Lock()
			err := w.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: SyncPodCreate, Pod: versionedPod("late", 1)})
			w.mu.Unlock()
			require.ErrorIs(t, err, ErrStopped)
			assert.Nil(t, w.handed.top.Load())
			_, ok := w.Pod("late")
			assert.False(t, ok, "nothing recorded")
		})
	})
	t.Run("Run's shutdown waits for a caller pushing as it closes the stack", func(t *testing.T) {
		v := &versions{}
		w, stop := startEngine(t, v, Options[struct{}]{})
		// A caller that has looked at the stack, found it open, and not yet
		// pushed.
		w.handed.pushing.Add(1)
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		for !w.handed.closed.Load() { // the shutdown is closing the stack
			runtime.Gosched()
		}
		hu := &handedUpdate{u: update{updateType: SyncPodCreate, pod: versionedPod("racing", 1)}}
		hu.prev = w.handed.top.Load()
		require.True(t, w.handed.top.CompareAndSwap(hu.prev, hu))
		w.handed.n.Add(1)
		w.handed.pushing.Add(-1)
		<-stopped
		w.mu.Lock() // not lock: it would apply what is still handed
		_, ok := w.m.info("racing")
		top := w.handed.top.Load()
		w.mu.Unlock()
		assert.True(t, ok, "handed before the stack closed: recorded before Run returned")
		assert.Nil(t, top)
	})
	t.Run("an update pushed after the holder let go is applied by its caller", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			v := &versions{}
			w, _ := startEngine(t, v, Options[struct{}]{})
			synctest.Wait()
			// The caller found the lock taken; the holder let go and found
			// nothing handed; only then does the caller push.
			handed, err := w.handOver(update{updateType: SyncPodCreate, pod: versionedPod("late", 1)}, killRequest{})
			require.NoError(t, err)
			require.True(t, handed)
			w.mu.Lock()
			_, ok := w.m.info("late")
			top := w.handed.top.Load()
			w.mu.Unlock()
			assert.True(t, ok, "applied before handOver returned")
			assert.Nil(t, top)
			synctest.Wait()
			assert.Equal(t, []string{"1"}, v.of("late"))
		})
	})
}

// TestHandoffUnderContention has producers race workers for the lock, so
// that updates are handed over as they come: every pod's SyncPods see its
// versions in order, and the last one each producer sent.
func TestHandoffUnderContention(t *testing.T) {
	v := &versions{}
	w, stop := startEngine(t, v, Options[struct{}]{})
	const producers, pods, versionsPerPod = 4, 50, 40
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for rv := 1; rv <= versionsPerPod; rv++ {
				for i := range pods {
					ut := SyncPodUpdate
					if rv == 1 {
						ut = SyncPodCreate
					}
					pod := versionedPod(fmt.Sprintf("p%d-%d", p, i), rv)
					if err := w.UpdatePod(context.Background(), UpdatePodOptions{UpdateType: ut, Pod: pod}); err != nil {
						t.Errorf("UpdatePod: %v", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	last := strconv.Itoa(versionsPerPod)
	for p := range producers {
		for i := range pods {
			uid := types.UID(fmt.Sprintf("p%d-%d", p, i))
			_, _, err := w.WaitFor(context.Background(), uid, func(info PodInfo, ok bool) bool {
				seen := v.of(uid)
				return ok && !info.Working && len(seen) > 0 && seen[len(seen)-1] == last
			})
			require.NoError(t, err, "pod %s", uid)
			seen := v.of(uid)
			for j := 1; j < len(seen); j++ {
				a, _ := strconv.Atoi(seen[j-1])
				b, _ := strconv.Atoi(seen[j])
				require.Less(t, a, b, "pod %s synced %v: a version went back", uid, seen)
			}
		}
	}
	stop()
	assert.Nil(t, w.handed.top.Load())
}
