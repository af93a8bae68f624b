package podworker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// PodInfo tells whether the last sync succeeded, when, and what comes next.
func TestPodInfoSyncOutcome(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{BackOff: 10 * time.Second, MaxBackOff: 10 * time.Second, ResyncInterval: time.Hour})
		p := mkPod("p")
		start := time.Now()

		g := r.hold("p", podworker.HookSyncPod)
		r.update(podworker.SyncPodCreate, p)
		r.entered(g)
		info := r.info("p")
		assert.True(t, info.LastSyncTime.IsZero(), "no hook has returned yet")
		assert.NoError(t, info.LastSyncError)
		assert.Zero(t, info.ConsecutiveFailures)
		assert.True(t, info.NextSyncTime.IsZero(), "a hook runs now: nothing is scheduled")

		// Two failures in a row, then a success.
		r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Err: errBoom})
		r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Err: errBoom})
		time.Sleep(time.Second)
		g.Release()
		r.settle()
		info = r.info("p")
		assert.Equal(t, start.Add(time.Second), info.LastSyncTime)
		assert.ErrorIs(t, info.LastSyncError, errBoom)
		assert.Equal(t, 1, info.ConsecutiveFailures)
		assert.False(t, info.NextSyncTime.Before(start.Add(11*time.Second)), "the retry is due after the backoff: %v", info.NextSyncTime)
		assert.True(t, info.NextSyncTime.Before(start.Add(16*time.Second)), "within its jitter: %v", info.NextSyncTime)

		time.Sleep(16 * time.Second)
		r.settle()
		info = r.info("p")
		assert.Equal(t, 2, info.ConsecutiveFailures)
		assert.ErrorIs(t, info.LastSyncError, errBoom)

		time.Sleep(16 * time.Second)
		r.settle()
		info = r.info("p")
		require.Equal(t, "sync:create=error sync:sync=error sync:sync", r.trace("p"), "the held call took the first scripted failure")
		assert.NoError(t, info.LastSyncError, "nil after a success")
		assert.Zero(t, info.ConsecutiveFailures)
		assert.Equal(t, r.f.CallsFor("p")[2].Time, info.LastSyncTime)
		assert.False(t, info.NextSyncTime.Before(info.LastSyncTime.Add(time.Hour)), "the resync is scheduled: %v", info.NextSyncTime)

		// Work that is ready shows as due now.
		g = r.hold("p", podworker.HookSyncPod)
		r.w.Resync("p")
		r.entered(g)
		assert.True(t, r.info("p").NextSyncTime.IsZero())
		g.Release()
		r.settle()

		// A finished pod has nothing scheduled.
		r.kill(p, nil)
		r.settle()
		info = r.info("p")
		require.Equal(t, podworker.StageFinished, info.Stage)
		assert.True(t, info.NextSyncTime.IsZero())
		assert.NoError(t, info.LastSyncError)
	})
}

// Work waiting for a worker (the cap is reached) is due now.
func TestPodInfoNextSyncTimeOfReadyWork(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{MaxConcurrentSyncs: 1})
		g := r.hold("a", podworker.HookSyncPod)
		r.update(podworker.SyncPodCreate, mkPod("a"))
		r.entered(g)
		time.Sleep(time.Second)
		r.update(podworker.SyncPodCreate, mkPod("b"))
		r.settle()
		assert.Equal(t, time.Now(), r.info("b").NextSyncTime, "b waits only for a worker")
		g.Release()
		r.settle()
	})
}
