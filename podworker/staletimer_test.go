package podworker

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A kill cancels its pod's resync timer by marking the heap entry stale;
// fireDue leaves stale entries until they are due (a burst of kills would
// otherwise cost one heap operation each while they come), and syncKnown
// drops those of the pods it forgets in one pass.
func TestStaleTimerEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := &versions{}
		w, _ := startEngine(t, v, Options[struct{}]{ResyncInterval: time.Minute})
		ctx := context.Background()
		heapLen := func() int {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.m.delayed.Len()
		}
		syncsOf := func(uid types.UID) int { return len(v.of(uid)) }

		for _, uid := range []string{"a", "b", "c"} {
			require.NoError(t, w.UpdatePod(ctx, UpdatePodOptions{UpdateType: SyncPodCreate, Pod: versionedPod(uid, 1)}))
		}
		synctest.Wait()
		require.Equal(t, 3, heapLen(), "each synced pod waits for its resync")

		for _, uid := range []string{"a", "b", "c"} {
			require.NoError(t, w.UpdatePod(ctx, UpdatePodOptions{UpdateType: SyncPodKill, Pod: versionedPod(uid, 1)}))
		}
		synctest.Wait()
		for _, uid := range []types.UID{"a", "b", "c"} {
			info, ok := w.Pod(uid)
			require.True(t, ok)
			require.GreaterOrEqual(t, info.Stage, StageTerminated, "pod %s", uid)
			assert.True(t, info.NextSyncTime.IsZero(), "pod %s: its resync was cancelled", uid)
		}
		w.mu.Lock()
		var fx effects
		w.m.fireDue(&fx) // as Run's timer loop does whenever it wakes
		w.mu.Unlock()
		assert.Equal(t, 3, heapLen(), "the cancelled resyncs stay in the heap, stale, until due")

		// Forgetting a killed pod drops its stale entry at once.
		w.SyncKnownPods([]*v1.Pod{versionedPod("b", 1), versionedPod("c", 1)})
		assert.Equal(t, 2, heapLen(), "a's entry went with a")

		// By the latest resync time (the interval plus its 50% jitter),
		// the stale entries of b and c went and nothing ran for them; d,
		// created now, resynced and waits for its next resync.
		require.NoError(t, w.UpdatePod(ctx, UpdatePodOptions{UpdateType: SyncPodCreate, Pod: versionedPod("d", 1)}))
		time.Sleep(91 * time.Second)
		synctest.Wait()
		assert.Equal(t, 1, syncsOf("b"), "a cancelled resync does not run")
		assert.Equal(t, 1, syncsOf("c"), "a cancelled resync does not run")
		assert.Equal(t, 2, syncsOf("d"), "d resynced")
		assert.Equal(t, 1, heapLen(), "only d's next resync is left")
	})
}
