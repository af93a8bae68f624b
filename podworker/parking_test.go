package podworker_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// Warm workers: a worker that runs out of work parks for a moment rather
// than exits, so the next burst finds a goroutine waiting. They are the
// engine's, never a pod's: a few at most, gone a second after the work
// stops, and gone when Run returns.

func TestWarmWorkers(t *testing.T) {
	t.Run("work goes to the parked worker, not to a new goroutine", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			r.settle()
			idle := bubbleGoroutines()
			r.started(mkPod("a"))
			require.Equal(t, idle+1, bubbleGoroutines(), "the worker that ran a's SyncPod is parked")
			g := r.hold("b", podworker.HookSyncPod)
			r.update(podworker.SyncPodCreate, mkPod("b"))
			r.entered(g)
			assert.Equal(t, idle+1, bubbleGoroutines(), "b's hook runs on the parked worker")
			g.Release()
			r.settle()
			assert.Equal(t, "sync:create", r.trace("b"))
			assert.Equal(t, idle+1, bubbleGoroutines())
		})
	})
	t.Run("a few stay parked, whatever ran, and exit within a second", func(t *testing.T) {
		for _, capped := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("MaxConcurrentSyncs=%d", capped), func(t *testing.T) {
				bubble(t, func(t *testing.T) {
					r := startRig(t, podworker.Options[struct{}]{MaxConcurrentSyncs: capped})
					r.settle()
					idle := bubbleGoroutines()
					const n = 20
					gates := make([]*podworkertest.Gate, n)
					for i := range gates {
						uid := types.UID(fmt.Sprint(i))
						gates[i] = r.hold(uid, podworker.HookSyncPod)
						r.update(podworker.SyncPodCreate, mkPod(string(uid)))
					}
					for len(gates) > 0 {
						r.settle()
						left := gates[:0]
						for _, g := range gates {
							select {
							case <-g.Entered():
								g.Release()
							default:
								left = append(left, g)
							}
						}
						gates = left
					}
					r.settle()
					require.Equal(t, n, r.f.Count(podworkertest.AnyUID, podworker.HookSyncPod))
					assert.Equal(t, idle+maxParked(capped), bubbleGoroutines(), "the bound of warm workers")

					time.Sleep(400 * time.Millisecond)
					r.settle()
					assert.Equal(t, idle+maxParked(capped), bubbleGoroutines(), "still warm after 400ms idle")
					time.Sleep(600 * time.Millisecond)
					r.settle()
					assert.Equal(t, idle, bubbleGoroutines(), "gone after a second idle")
				})
			})
		}
	})
	t.Run("a worker kept busy stays; the ones left idle exit", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			r.settle()
			idle := bubbleGoroutines()
			gates := []*podworkertest.Gate{r.hold("a", podworker.HookSyncPod), r.hold("b", podworker.HookSyncPod)}
			r.update(podworker.SyncPodCreate, mkPod("a"))
			r.update(podworker.SyncPodCreate, mkPod("b"))
			r.settle()
			for _, g := range gates {
				r.entered(g)
				g.Release()
			}
			r.settle()
			require.Equal(t, idle+min(2, maxParked(0)), bubbleGoroutines())
			// One update every 300ms for 3s: one worker is enough, and only
			// it stays.
			for i := range 10 {
				time.Sleep(300 * time.Millisecond)
				r.update(podworker.SyncPodUpdate, mkPod("a"))
				r.settle()
				if i >= 4 {
					require.Equal(t, idle+1, bubbleGoroutines(), "after %v", time.Duration(i+1)*300*time.Millisecond)
				}
			}
			assert.Equal(t, 11, r.f.Count("a", podworker.HookSyncPod))
			r.coolDown()
			assert.Equal(t, idle, bubbleGoroutines())
		})
	})
	t.Run("the idle timeout runs on the injected clock", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			fc := testingclock.NewFakeClock(time.Unix(1000, 0))
			f := &podworkertest.FakeSyncer[struct{}]{Clock: fc}
			w, err := podworker.New[struct{}](f, podworker.Options[struct{}]{Clock: fc, ResyncInterval: -1})
			require.NoError(t, err)
			podworkertest.Start(t, w)
			synctest.Wait()
			idle := bubbleGoroutines()
			require.False(t, fc.HasWaiters(), "no work, no timer")
			require.NoError(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("p")}))
			synctest.Wait()
			require.Equal(t, "sync:create", f.Trace("p"))
			require.Equal(t, idle+1, bubbleGoroutines())
			require.True(t, fc.HasWaiters(), "the parked worker's timeout")
			time.Sleep(time.Hour) // the bubble's clock is not the engine's
			synctest.Wait()
			require.Equal(t, idle+1, bubbleGoroutines(), "still parked: the injected clock did not move")
			fc.Step(time.Second)
			synctest.Wait()
			fc.Step(time.Second)
			synctest.Wait()
			assert.Equal(t, idle, bubbleGoroutines())
			assert.False(t, fc.HasWaiters())
		})
	})
	t.Run("Run's return ends the parked workers", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			before := bubbleGoroutines()
			r := startRig(t, podworker.Options[struct{}]{})
			for i := range 10 {
				r.update(podworker.SyncPodCreate, mkPod(fmt.Sprint(i)))
			}
			r.settle()
			require.Greater(t, bubbleGoroutines(), before+1, "Run and parked workers")
			r.stop()
			r.settle()
			assert.Equal(t, before, bubbleGoroutines())
		})
	})
}
