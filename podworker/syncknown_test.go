package podworker

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

// SyncKnownPods rebuilds the records map when most of it was forgotten (Go
// maps never shrink): the records it keeps must survive the rebuild, and an
// engine that forgot everything keeps nothing.
func TestSyncKnownPodsRebuildKeepsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, _ := startEngine(t, &versions{}, Options[struct{}]{})
		ctx := context.Background()
		const pods, kept = 400, 40 // kept < pods/4: the map is rebuilt
		var all, desired []*v1.Pod
		for i := range pods {
			p := versionedPod(fmt.Sprint("p", i), 1)
			all = append(all, p)
			require.NoError(t, w.UpdatePod(ctx, UpdatePodOptions{UpdateType: SyncPodCreate, Pod: p}))
		}
		synctest.Wait()
		for i, p := range all {
			if i < kept {
				desired = append(desired, p)
				continue
			}
			require.NoError(t, w.UpdatePod(ctx, UpdatePodOptions{UpdateType: SyncPodKill, Pod: p}))
		}
		synctest.Wait()

		out := w.SyncKnownPods(desired)
		assert.Equal(t, kept, len(out), "the killed pods are forgotten")
		for _, p := range desired {
			info, ok := w.Pod(p.UID)
			require.True(t, ok, "pod %s survived the rebuild", p.UID)
			assert.Equal(t, StageSyncing, info.Stage)
		}
		w.mu.Lock()
		assert.Equal(t, kept, len(w.m.records))
		assert.Equal(t, kept, w.m.peak, "the new map's size is the new peak")
		w.mu.Unlock()

		for _, p := range desired {
			require.NoError(t, w.UpdatePod(ctx, UpdatePodOptions{UpdateType: SyncPodKill, Pod: p}))
		}
		synctest.Wait()
		assert.Zero(t, len(w.SyncKnownPods(nil)))
		assert.Zero(t, len(w.Pods()))
	})
}
