package podworker_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// Workers per CPU, and the stall check (stall.go): quick hooks run on at
// most one goroutine per CPU, however many pods are ready; hooks that
// block are found blocked within two stall periods and get no longer in
// the way of other pods.

// yielding is a SyncPod that computes for a while without blocking: it
// yields its CPU a number of times, so that other goroutines run in the
// middle of it, and counts how many run at once.
type yielding struct {
	yields         int
	inFlight, peak atomic.Int32
}

func (y *yielding) syncPod(context.Context, podworker.UpdateType, *v1.Pod, *v1.Pod, struct{}) (bool, error) {
	n := y.inFlight.Add(1)
	for {
		p := y.peak.Load()
		if n <= p || y.peak.CompareAndSwap(p, n) {
			break
		}
	}
	for range y.yields {
		runtime.Gosched()
	}
	y.inFlight.Add(-1)
	return false, nil
}

// startYieldingRig is a rig whose unheld SyncPods are y's.
func startYieldingRig(t *testing.T, y *yielding, opts podworker.Options[struct{}]) *rig {
	t.Helper()
	opts.ResyncInterval = -1
	f := podworkertest.NewSpySyncer[struct{}](podworker.PodSyncerFuncs[struct{}]{SyncPodFunc: y.syncPod})
	w, err := podworker.New[struct{}](f, opts)
	require.NoError(t, err)
	r := &rig{t: t, ctx: context.Background(), f: f, w: w}
	r.start()
	return r
}

func TestQuickHooksRunOnOneWorkerPerCPU(t *testing.T) {
	bubble(t, func(t *testing.T) {
		y := &yielding{yields: 50}
		r := startYieldingRig(t, y, podworker.Options[struct{}]{})
		r.settle()
		idle := bubbleGoroutines()
		const n = 300
		for i := range n {
			r.update(podworker.SyncPodCreate, mkPod(fmt.Sprint(i)))
		}
		r.settle()
		require.Equal(t, n, r.f.Count(podworkertest.AnyUID, podworker.HookSyncPod))
		assert.LessOrEqual(t, int(y.peak.Load()), maxParked(0), "hooks that never block run on one worker per CPU at most")
		assert.Equal(t, int32(0), y.inFlight.Load())
		assert.LessOrEqual(t, bubbleGoroutines(), idle+maxParked(0))
		r.coolDown()
		assert.Equal(t, idle, bubbleGoroutines())
	})
}

func TestBlockedHooksGetWorkersPeriodByPeriod(t *testing.T) {
	bubble(t, func(t *testing.T) {
		before := bubbleGoroutines()
		r := startRig(t, podworker.Options[struct{}]{})
		r.settle()
		idle := bubbleGoroutines()
		per := maxParked(0)
		n := 5*per + 1
		for i := range n {
			uid := types.UID(fmt.Sprint(i))
			r.hold(uid, podworker.HookSyncPod)
			r.update(podworker.SyncPodCreate, mkPod(string(uid)))
		}
		r.settle()
		require.Equal(t, per, r.f.InFlight(), "one worker per CPU at once")
		// Each period, the hooks taken before the check was armed are
		// found blocked, and as many workers more take the pods behind
		// them.
		for k := 1; r.f.InFlight() < n; k++ {
			require.LessOrEqual(t, k, n, "the workers stopped growing")
			time.Sleep(podworker.StallPeriod)
			r.settle()
			require.Equal(t, min(n, per*(k+1)), r.f.InFlight(), "after %d stall periods", k)
			require.Equal(t, idle+r.f.InFlight(), bubbleGoroutines(), "one worker per hook in flight")
		}
		assert.Equal(t, 1, r.f.MaxInFlightPerUID())

		// Run's return cancels the blocked hooks (the gates honour their
		// context) and leaves no worker behind, stuck or not.
		r.stop()
		r.settle()
		assert.Equal(t, before, bubbleGoroutines())
		assert.Zero(t, r.f.InFlight())
	})
}

func TestPodBehindBlockedHooksWaitsOneStallPeriod(t *testing.T) {
	for _, name := range []string{"hooks blocked long before", "hooks blocked as the pod comes"} {
		t.Run(name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				r := startRig(t, podworker.Options[struct{}]{})
				per := maxParked(0)
				for i := range per {
					uid := types.UID(fmt.Sprint("blocked", i))
					g := r.hold(uid, podworker.HookSyncPod)
					r.update(podworker.SyncPodCreate, mkPod(string(uid)))
					r.entered(g)
				}
				if name == "hooks blocked long before" {
					time.Sleep(time.Minute)
					r.settle()
				}
				start := time.Now()
				r.update(podworker.SyncPodCreate, mkPod("late"))
				r.settle()
				require.Zero(t, r.f.Count("late", podworker.HookSyncPod), "every worker per CPU is in a hook")
				_, err := r.f.WaitForCalls(context.Background(), func(calls []podworkertest.Call[struct{}]) bool {
					for _, c := range calls {
						if c.UID == "late" {
							return true
						}
					}
					return false
				})
				require.NoError(t, err)
				assert.Equal(t, podworker.StallPeriod, time.Since(start), "a check armed as the pod came finds the hooks blocked before it")
				assert.Equal(t, "sync:create", r.trace("late"))
			})
		})
	}
}

func TestStuckWorkersCountAgainOnceTheirHookReturns(t *testing.T) {
	bubble(t, func(t *testing.T) {
		y := &yielding{yields: 50}
		r := startYieldingRig(t, y, podworker.Options[struct{}]{})
		r.settle()
		idle := bubbleGoroutines()
		per := maxParked(0)
		var gates []*podworkertest.Gate
		for i := range 2 * per {
			uid := types.UID(fmt.Sprint("blocked", i))
			gates = append(gates, r.hold(uid, podworker.HookSyncPod))
			r.update(podworker.SyncPodCreate, mkPod(string(uid)))
		}
		r.stalled(2 * per)
		require.Equal(t, 2*per, r.f.InFlight())
		for _, g := range gates {
			g.Release()
		}
		r.settle()
		require.Zero(t, r.f.InFlight())

		// The workers that were stuck are ordinary again: a burst of
		// quick hooks runs on one per CPU.
		y.peak.Store(0)
		const n = 200
		for i := range n {
			r.update(podworker.SyncPodCreate, mkPod(fmt.Sprint(i)))
		}
		r.settle()
		require.Equal(t, n+2*per, r.f.Count(podworkertest.AnyUID, podworker.HookSyncPod))
		assert.LessOrEqual(t, int(y.peak.Load()), per)
		assert.LessOrEqual(t, bubbleGoroutines(), idle+per, "the workers beyond the bound exited")
		r.coolDown()
		assert.Equal(t, idle, bubbleGoroutines())
	})
}

func TestStallCheckRunsOnTheInjectedClock(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := testingclock.NewFakeClock(time.Unix(1000, 0))
		f := &podworkertest.FakeSyncer[struct{}]{Clock: fc}
		w, err := podworker.New[struct{}](f, podworker.Options[struct{}]{Clock: fc, ResyncInterval: -1})
		require.NoError(t, err)
		podworkertest.Start(t, w)
		per := maxParked(0)
		for i := range per {
			uid := types.UID(fmt.Sprint("blocked", i))
			f.Hold(uid, podworker.HookSyncPod)
			require.NoError(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod(string(uid))}))
		}
		synctest.Wait()
		require.Equal(t, per, f.InFlight())
		require.NoError(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("late")}))
		time.Sleep(time.Hour) // the bubble's clock is not the engine's
		synctest.Wait()
		require.Zero(t, f.Count("late", podworker.HookSyncPod), "the injected clock did not move")
		fc.Step(podworker.StallPeriod - time.Nanosecond)
		synctest.Wait()
		require.Zero(t, f.Count("late", podworker.HookSyncPod), "a stall period has not passed")
		fc.Step(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, "sync:create", f.Trace("late"))
	})
}
