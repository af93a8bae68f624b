package podworker_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/podworker"
)

const slowMsg = "A pod hook is still running after its context was cancelled"

// A hook that ignores its cancelled context is named in the log, at level 0,
// once SlowHookWarning has passed and again every SlowHookWarning, and
// counted once.
func TestSlowHookWarning(t *testing.T) {
	t.Run("after the default minute, then every minute, counted once", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			var logs logSink
			metrics := newFakeMetrics()
			r := startRig(t, podworker.Options[struct{}]{Logger: logs.logger(), Metrics: metrics})
			p := mkPod("p")
			g := r.f.HoldUncancelable("p", podworker.HookSyncPod)
			t.Cleanup(g.Release) // before the engine stops, should the test fail
			r.update(podworker.SyncPodCreate, p)
			r.entered(g)
			time.Sleep(5 * time.Minute)
			r.settle()
			assert.Empty(t, logs.all(slowMsg), "a hook whose context is live may take its time")

			r.kill(p, nil) // cancels SyncPod's context
			time.Sleep(59 * time.Second)
			r.settle()
			assert.Empty(t, logs.all(slowMsg))
			time.Sleep(time.Second)
			r.settle()
			lines := logs.all(slowMsg)
			require.Len(t, lines, 1)
			assert.Contains(t, lines[0], `"podUID"="p"`)
			assert.Contains(t, lines[0], `"pod"="p_ns"`)
			assert.Contains(t, lines[0], `"hook"="SyncPod"`)
			assert.Contains(t, lines[0], `"cancelledFor"="1m0s"`)
			assert.Contains(t, lines[0], `"level"=0`)
			assert.Equal(t, 1, metrics.counter("slowHooks"))

			time.Sleep(time.Minute)
			r.settle()
			lines = logs.all(slowMsg)
			require.Len(t, lines, 2)
			assert.Contains(t, lines[1], `"cancelledFor"="2m0s"`)
			assert.Equal(t, 1, metrics.counter("slowHooks"), "one hook call, counted once")

			g.Release()
			r.settle()
			time.Sleep(10 * time.Minute)
			r.settle()
			assert.Len(t, logs.all(slowMsg), 2, "no report once it returned")
			assert.Equal(t, "sync:create kill(30) terminated", r.trace("p"))
		})
	})
	t.Run("a shorter grace period cancels SyncTerminatingPod; its own interval", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			var logs logSink
			r := startRig(t, podworker.Options[struct{}]{Logger: logs.logger(), SlowHookWarning: 10 * time.Second})
			p := mkPod("p")
			r.started(p)
			g := r.f.HoldUncancelable("p", podworker.HookSyncTerminatingPod)
			t.Cleanup(g.Release) // before the engine stops, should the test fail
			r.kill(p, nil)
			r.entered(g)
			r.kill(p, &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(5)})
			time.Sleep(10 * time.Second)
			r.settle()
			lines := logs.all(slowMsg)
			require.Len(t, lines, 1)
			assert.Contains(t, lines[0], `"hook"="SyncTerminatingPod"`)
			g.Release()
			r.settle()
		})
	})
	t.Run("a well-behaved hook is never reported", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			var logs logSink
			metrics := newFakeMetrics()
			r := startRig(t, podworker.Options[struct{}]{Logger: logs.logger(), Metrics: metrics})
			p := mkPod("p")
			g := r.hold("p", podworker.HookSyncPod)
			r.update(podworker.SyncPodCreate, p)
			r.entered(g)
			r.kill(p, nil)
			time.Sleep(10 * time.Minute)
			r.settle()
			assert.Empty(t, logs.all(slowMsg))
			assert.Equal(t, 0, metrics.counter("slowHooks"))
		})
	})
	t.Run("a negative SlowHookWarning turns it off", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			var logs logSink
			r := startRig(t, podworker.Options[struct{}]{Logger: logs.logger(), SlowHookWarning: -1})
			p := mkPod("p")
			g := r.f.HoldUncancelable("p", podworker.HookSyncPod)
			t.Cleanup(g.Release) // before the engine stops, should the test fail
			r.update(podworker.SyncPodCreate, p)
			r.entered(g)
			r.kill(p, nil)
			time.Sleep(10 * time.Minute)
			r.settle()
			assert.Empty(t, logs.all(slowMsg))
			g.Release()
			r.settle()
		})
	})
}

const drainMsg = "Run is shutting down and still waits for pod hooks to return"

// While Run shuts down, it says every SlowHookWarning which hooks it still
// waits for.
func TestRunNamesTheHooksItWaitsFor(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var logs logSink
		r := newRig(t, podworker.Options[struct{}]{Logger: logs.logger(), SlowHookWarning: 30 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.w.Run(ctx) }()
		p := mkPod("p")
		g := r.f.HoldUncancelable("p", podworker.HookSyncPod)
		t.Cleanup(g.Release) // before the engine stops, should the test fail
		r.update(podworker.SyncPodCreate, p)
		r.entered(g)

		cancel()
		time.Sleep(29 * time.Second)
		synctest.Wait()
		assert.Empty(t, logs.all(drainMsg))
		time.Sleep(time.Second)
		synctest.Wait()
		lines := logs.all(drainMsg)
		require.Len(t, lines, 1)
		assert.Contains(t, lines[0], `"waited"="30s"`)
		assert.Contains(t, lines[0], `"running"=1`)
		assert.Contains(t, lines[0], `SyncPod p_ns (p)`)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		require.Len(t, logs.all(drainMsg), 2)
		assert.Contains(t, logs.all(drainMsg)[1], `"waited"="1m0s"`)
		select {
		case <-done:
			t.Fatal("Run returned while a hook still runs")
		default:
		}
		g.Release()
		require.NoError(t, <-done)
	})
}
