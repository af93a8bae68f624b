package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podmanager"
	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// bareHandler is a Handler over fresh workers and store with options
// that say nothing about running the workers.
func bareHandler(t *testing.T) (*lifecycle.SyncLoop, *podworker.PodWorkers[struct{}], *podworkertest.FakeSyncer[struct{}]) {
	t.Helper()
	syncer := podworkertest.NewFakeSyncer[struct{}]()
	workers, err := podworker.New[struct{}](syncer, podworker.Options[struct{}]{})
	require.NoError(t, err)
	h, err := lifecycle.NewSyncLoop(workers, podmanager.New(), lifecycle.SyncLoopOptions{})
	require.NoError(t, err)
	return h, workers, syncer
}

// Issue 11: Run without the workers running left every pod not-started,
// silently. Run now runs the workers it was given, so the mistake cannot
// be made.
func TestRunRunsTheWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, workers, syncer := bareHandler(t)
		updates := make(chan podconfig.PodUpdate, 1)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx, updates) }()

		updates <- podconfig.PodUpdate{Op: podconfig.OpAdd, Source: mirror.ApiserverSource, Pods: []*v1.Pod{apiPod("w", "web", 0)}}
		synctest.Wait()
		assert.Equal(t, "sync:create", syncer.Trace("w"), "the pod's SyncPod ran: Run started the workers")

		cancel()
		require.NoError(t, <-done)
		assert.ErrorIs(t, workers.UpdatePod(t.Context(), podworker.UpdatePodOptions{Pod: apiPod("x", "x", 0)}), podworker.ErrStopped,
			"Run stopped the workers before it returned")
	})
}

// Workers the caller already runs are a mistake Run reports at once,
// instead of sharing them with another loop.
func TestRunRefusesWorkersAlreadyRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, workers, _ := bareHandler(t)
		workersCtx, stopWorkers := context.WithCancel(t.Context())
		workersDone := make(chan error, 1)
		go func() { workersDone <- workers.Run(workersCtx) }()
		synctest.Wait()

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err := h.Run(ctx, nil)
		require.ErrorContains(t, err, "lifecycle: the pod workers stopped while the sync loop ran")
		assert.ErrorContains(t, err, "already running")
		assert.NoError(t, ctx.Err(), "Run returned at once, not when its context ended")

		stopWorkers()
		require.NoError(t, <-workersDone)
	})
}

// failingRun is pod workers whose Run fails at once.
type failingRun struct{ lifecycle.Workers }

func (failingRun) Run(context.Context) error { return errors.New("boom") }

func TestRunDrainsWorkers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.start()
		gate := e.syncer.Hold("slow", podworker.HookSyncPod)
		e.set(mirror.ApiserverSource, apiPod("slow", "slow", 0))
		require.NoError(t, gate.Wait(e.ctx))

		e.stop()
		e.stop = nil
		err := <-e.runDone
		require.NoError(t, err)
		select {
		case <-gate.Returned():
		default:
			t.Fatal("Run returned while a hook was still running")
		}
		calls := e.syncer.CallsFor("slow")
		assert.True(t, calls[0].Canceled, "the hook saw its context end")
		assert.ErrorIs(t, e.workers.UpdatePod(t.Context(), podworker.UpdatePodOptions{Pod: apiPod("x", "x", 0)}), podworker.ErrStopped)
	})
}

func TestRunReportsWorkersStoppingEarly(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		h, err := lifecycle.NewSyncLoop(failingRun{e.workers}, e.store, lifecycle.SyncLoopOptions{})
		require.NoError(t, err)
		err = h.Run(t.Context(), nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "boom")
		assert.ErrorContains(t, h.Run(t.Context(), nil), "called twice")
	})
}
