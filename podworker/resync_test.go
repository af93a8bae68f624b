package podworker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

func TestResync(t *testing.T) {
	t.Run("an unknown UID is refused and nothing is recorded", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			assert.False(t, r.w.Resync("nobody"))
			r.settle()
			assert.Empty(t, r.w.Pods())
			assert.Empty(t, r.f.Calls())
		})
	})
	t.Run("a finished pod is refused and no hook runs", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			r.kill(p, nil)
			r.settle()
			require.Equal(t, podworker.StageFinished, r.info("p").Stage)
			assert.False(t, r.w.Resync("p"))
			r.settle()
			assert.Equal(t, "sync:create kill(30) terminated", r.trace("p"))
		})
	})
	t.Run("an idle pod syncs again at once with its newest pod", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			assert.True(t, r.w.Resync("p"))
			r.settle()
			require.Equal(t, "sync:create sync:sync", r.trace("p"))
			assert.Same(t, p, r.f.CallsFor("p")[1].Pod)
		})
	})
	t.Run("calls while a hook runs coalesce into one run after it", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			g := r.hold("p", podworker.HookSyncPod)
			r.update(podworker.SyncPodCreate, p)
			r.entered(g)
			for range 3 {
				assert.True(t, r.w.Resync("p"))
			}
			g.Release()
			r.settle()
			assert.Equal(t, "sync:create sync:sync", r.trace("p"))
		})
	})
	t.Run("a pending update runs instead", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			g := r.hold("p", podworker.HookSyncPod)
			r.update(podworker.SyncPodCreate, p)
			r.entered(g)
			p2 := p.DeepCopy()
			r.update(podworker.SyncPodUpdate, p2)
			assert.True(t, r.w.Resync("p"))
			g.Release()
			r.settle()
			require.Equal(t, "sync:create sync:update", r.trace("p"))
			assert.Same(t, p2, r.f.CallsFor("p")[1].Pod)
		})
	})
	t.Run("a pod waiting for a retry runs at once", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{BackOff: time.Hour})
			p := mkPod("p")
			r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Err: errBoom})
			r.update(podworker.SyncPodCreate, p)
			r.settle()
			require.Equal(t, "sync:create=error", r.trace("p"))
			assert.True(t, r.w.Resync("p"))
			r.settle()
			assert.Equal(t, "sync:create=error sync:sync", r.trace("p"))
		})
	})
	t.Run("a terminated pod reruns its cleanup", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{BackOff: time.Hour})
			p := mkPod("p")
			r.started(p)
			r.f.Next("p", podworker.HookSyncTerminatedPod, podworkertest.Result{Err: errBoom})
			r.kill(p, nil)
			r.settle()
			require.Equal(t, "sync:create kill(30) terminated=error", r.trace("p"))
			assert.True(t, r.w.Resync("p"))
			r.settle()
			assert.Equal(t, "sync:create kill(30) terminated=error terminated", r.trace("p"))
			assert.Equal(t, podworker.StageFinished, r.info("p").Stage)
		})
	})
	t.Run("after Run returned nothing will run: false for every UID", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			r.stop()
			assert.False(t, r.w.Resync("p"), "a syncing pod's hook will never run again")
			assert.False(t, r.w.Resync("nobody"))
			r.settle()
			assert.Equal(t, "sync:create", r.trace("p"))
			assert.False(t, r.info("p").Working, "and nothing was recorded")
		})
	})
	t.Run("before Run a known pod's hook will run once it does", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := newRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.update(podworker.SyncPodCreate, p)
			assert.True(t, r.w.Resync("p"))
			r.start()
			r.settle()
			assert.Equal(t, "sync:create", r.trace("p"), "coalesced with the pending create")
		})
	})
}
