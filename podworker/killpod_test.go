package podworker_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// KillPod, as upstream's TestKillPodNowFunc has it: what it waits for, and
// what ends the wait.

// killPod runs KillPod in its own goroutine (so the test goroutine never
// blocks and fake time cannot jump) and returns where its result arrives.
func (r *rig) killPod(ctx context.Context, pod *v1.Pod, ko podworker.KillPodOptions) <-chan error {
	res := make(chan error, 1)
	go func() { res <- r.w.KillPod(ctx, pod, ko) }()
	return res
}

func requireNoResult(t *testing.T, res <-chan error) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-res:
		t.Fatalf("KillPod returned %v too early", err)
	default:
	}
}

// Upstream's TestKillPodNowFunc, and what KillPod waits for.
func TestKillPod(t *testing.T) {
	failed := func(s *v1.PodStatus) { s.Phase, s.Reason, s.Message = v1.PodFailed, "reason", "message" }
	t.Run("an override of 0 kills with 1 and hands over the status func", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			require.NoError(t, r.w.KillPod(r.ctx, p, podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(0), PodStatusFunc: failed}))
			r.settle()
			assert.Equal(t, "kill(1) terminated", r.trace("p"))
			fn := r.f.CallsFor("p")[0].PodStatusFunc
			require.NotNil(t, fn)
			var s v1.PodStatus
			fn(&s)
			assert.Equal(t, v1.PodFailed, s.Phase)
			assert.Equal(t, "reason", s.Reason)
		})
	})
	t.Run("it returns once the containers are stopped, not before, and not after cleanup", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			gTerm := r.hold("p", podworker.HookSyncTerminatingPod)
			gDone := r.hold("p", podworker.HookSyncTerminatedPod)
			res := r.killPod(r.ctx, p, podworker.KillPodOptions{})
			r.entered(gTerm)
			requireNoResult(t, res)
			gTerm.Release()
			r.entered(gDone)
			require.NoError(t, <-res)
			gDone.Release()
		})
	})
	t.Run("several callers all return, and the last status func wins", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			r.f.Next("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Err: errBoom})
			first := r.killPod(r.ctx, p, podworker.KillPodOptions{PodStatusFunc: func(s *v1.PodStatus) { s.Reason = "first" }})
			r.entered(g)
			second := r.killPod(r.ctx, p, podworker.KillPodOptions{PodStatusFunc: func(s *v1.PodStatus) { s.Reason = "second" }})
			requireNoResult(t, first)
			requireNoResult(t, second)
			g.Release() // fails; the retry gets the newest status func
			time.Sleep(5 * time.Second)
			require.NoError(t, <-first)
			require.NoError(t, <-second)
			calls := r.f.CallsFor("p")
			require.Equal(t, "sync:create kill(30)=error kill(30) terminated", r.trace("p"))
			var s v1.PodStatus
			calls[2].PodStatusFunc(&s)
			assert.Equal(t, "second", s.Reason)
		})
	})
	t.Run("its ctx ending leaves the termination under way", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			ctx, cancel := context.WithCancel(context.Background())
			res := r.killPod(ctx, p, podworker.KillPodOptions{})
			r.entered(g)
			cancel()
			require.ErrorIs(t, <-res, context.Canceled)
			assert.True(t, r.w.IsPodTerminationRequested("p"))
			g.Release()
			r.settle()
			assert.Equal(t, "sync:create kill(30) terminated", r.trace("p"))
		})
	})
	t.Run("it returns at once for a pod that can no longer run", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			r.kill(p, nil)
			r.settle()
			require.NoError(t, <-r.killPod(r.ctx, p, podworker.KillPodOptions{}), "finished")

			r.started(mkStatic("holder", "web"))
			require.NoError(t, <-r.killPod(r.ctx, mkStatic("waiting", "web"), podworker.KillPodOptions{}), "a static pod that never started")
			assert.Empty(t, r.trace("waiting"))
		})
	})
	t.Run("given before Run, it waits for Run", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := newRig(t, podworker.Options[struct{}]{})
			res := r.killPod(r.ctx, mkPod("p"), podworker.KillPodOptions{})
			requireNoResult(t, res)
			r.start()
			require.NoError(t, <-res)
			r.settle()
			assert.Equal(t, "kill(30) terminated", r.trace("p"))
		})
	})
}
