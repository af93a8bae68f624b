package podworker_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// The driver's decisions D10 to D14 (see decisions_test.go), and the
// shutdown.

func TestDecisionD10_UpdateWithoutPodIsRejected(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		for _, ut := range []podworker.UpdateType{podworker.SyncPodSync, podworker.SyncPodUpdate, podworker.SyncPodCreate, podworker.SyncPodKill} {
			err := r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: ut})
			require.ErrorIs(t, err, podworker.ErrInvalidUpdate, ut.String())
		}
		r.settle()
		assert.Empty(t, r.w.Pods())
		assert.Empty(t, r.f.Calls())
		// A known pod is not disturbed by one either.
		r.started(mkPod("p"))
		require.ErrorIs(t, r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate}), podworker.ErrInvalidUpdate)
		r.settle()
		assert.Equal(t, "sync:create", r.trace("p"))
		assert.Equal(t, podworker.StageSyncing, r.info("p").Stage)
	})
}

func TestDecisionD11_GoroutinesFollowWork(t *testing.T) {
	t.Run("an idle pod holds no goroutine", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{ResyncInterval: time.Minute})
			r.settle()
			idle := bubbleGoroutines()
			const n = 500
			for i := range n {
				r.update(podworker.SyncPodCreate, mkPod(fmt.Sprint(i)))
			}
			r.settle()
			require.Equal(t, n, r.f.Count(podworkertest.AnyUID, podworker.HookSyncPod))
			// The workers that ran them wait, warm, for more work a moment:
			// a few, whatever the number of pods, and none for long.
			parked := bubbleGoroutines() - idle
			assert.True(t, parked >= 1 && parked <= maxParked(0), "1 to %d warm workers, not %d", maxParked(0), parked)
			r.coolDown()
			assert.Equal(t, idle, bubbleGoroutines(), "500 synced, idle pods")

			// Work in progress does take goroutines, and gives them back:
			// one per CPU at once, and one per running hook once they are
			// found blocked.
			gates := make([]*podworkertest.Gate, 10)
			for i := range gates {
				gates[i] = r.hold(types.UID(fmt.Sprint(i)), podworker.HookSyncPod)
				r.update(podworker.SyncPodUpdate, mkPod(fmt.Sprint(i)))
			}
			r.settle()
			assert.Equal(t, idle+min(10, maxParked(0)), bubbleGoroutines(), "one goroutine per CPU at once")
			r.stalled(10)
			assert.Equal(t, idle+10, bubbleGoroutines(), "one goroutine per blocked hook")
			for _, g := range gates {
				g.Release()
			}
			r.settle()
			assert.Equal(t, idle+maxParked(0), bubbleGoroutines(), "ten workers returned: only the warm ones stay")
			r.coolDown()
			assert.Equal(t, idle, bubbleGoroutines())

			// Resyncs of every pod leave nothing behind either.
			time.Sleep(2 * time.Minute)
			r.settle()
			assert.Greater(t, r.f.Count(podworkertest.AnyUID, podworker.HookSyncPod), 2*n)
			assert.LessOrEqual(t, bubbleGoroutines(), idle+maxParked(0))
			r.w.SyncKnownPods(nil) // no pods: no more resyncs
			r.settle()
			r.coolDown()
			assert.Equal(t, idle, bubbleGoroutines())
		})
	})
	t.Run("MaxConcurrentSyncs caps the hooks in flight", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{MaxConcurrentSyncs: 3})
			r.settle()
			idle := bubbleGoroutines()
			const n = 10
			gates := make([]*podworkertest.Gate, n)
			for i := range gates {
				gates[i] = r.hold(types.UID(fmt.Sprint(i)), podworker.HookSyncPod)
				r.update(podworker.SyncPodCreate, mkPod(fmt.Sprint(i)))
			}
			// Release the running hooks round by round: three run at a time
			// until fewer than three are left.
			done := map[int]bool{}
			for left := n; left > 0; left -= 3 {
				r.settle()
				r.stalled(3) // held hooks are blocked ones: past one per CPU, up to the cap
				require.Equal(t, min(3, left), r.f.InFlight())
				require.LessOrEqual(t, bubbleGoroutines(), idle+3, "no more workers than the cap")
				var running []*podworkertest.Gate
				for i, g := range gates {
					select {
					case <-g.Entered():
						if !done[i] {
							done[i] = true
							running = append(running, g)
						}
					default:
					}
				}
				require.Len(t, running, min(3, left))
				for _, g := range running {
					g.Release()
				}
			}
			r.settle()
			assert.Equal(t, n, r.f.Count(podworkertest.AnyUID, podworker.HookSyncPod))
			assert.Equal(t, 3, r.f.MaxInFlight())
			assert.LessOrEqual(t, bubbleGoroutines(), idle+maxParked(3))
			r.coolDown()
			assert.Equal(t, idle, bubbleGoroutines())
		})
	})
	t.Run("when capped, termination work runs before setup work", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{MaxConcurrentSyncs: 1})
			r.started(mkPod("running"))
			g := r.hold("busy", podworker.HookSyncPod)
			r.update(podworker.SyncPodCreate, mkPod("busy"))
			r.entered(g) // the only slot is taken
			r.update(podworker.SyncPodCreate, mkPod("new1"))
			r.update(podworker.SyncPodCreate, mkPod("new2"))
			r.kill(mkPod("running"), nil)
			g.Release()
			r.settle()
			var order []string
			for _, c := range r.f.Calls()[2:] {
				order = append(order, string(c.UID)+":"+c.Hook.String())
			}
			assert.Equal(t, []string{
				"running:SyncTerminatingPod", "running:SyncTerminatedPod",
				"new1:SyncPod", "new2:SyncPod",
			}, order)
			assert.Equal(t, 1, r.f.MaxInFlight())
		})
	})
}

// bubbleGoroutines counts the goroutines of the caller's testing/synctest
// bubble (the test goroutine included). Unlike runtime.NumGoroutine it
// does not see goroutines of the test framework or of other tests.
func bubbleGoroutines() int {
	own := make([]byte, 1024)
	own = own[:runtime.Stack(own, false)]
	header, _, _ := strings.Cut(string(own), "\n")
	i := strings.Index(header, "synctest bubble ")
	if i < 0 {
		panic("bubbleGoroutines called outside a synctest bubble: " + header)
	}
	marker := header[i:]
	marker = marker[:strings.IndexAny(marker, ",]")]
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, line := range strings.Split(string(buf), "\n") {
		if !strings.HasPrefix(line, "goroutine ") {
			continue
		}
		if j := strings.Index(line, marker); j >= 0 && strings.ContainsAny(line[j+len(marker):j+len(marker)+1], ",]") {
			count++
		}
	}
	return count
}

// logSink collects log lines; safe for concurrent use.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 10})
}

func (s *logSink) find(substr string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

// all returns every line containing substr.
func (s *logSink) all(substr string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

func TestDecisionD12_PanickingHookIsAFailedSync(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var logs logSink
		metrics := newFakeMetrics()
		r := newRig(t, podworker.Options[struct{}]{Logger: logs.logger(), Metrics: metrics, BackOff: time.Second})
		r.start()
		p := mkPod("p")
		r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Panic: "sync exploded"})
		r.update(podworker.SyncPodCreate, p)
		r.settle()
		assert.Equal(t, "sync:create=panic", r.trace("p"))
		line := logs.find("sync exploded")
		require.NotEmpty(t, line, "the panic is logged")
		assert.Contains(t, line, "goroutine", "with its stack")
		assert.Contains(t, line, `"podUID"="p"`)
		assert.Equal(t, 1, metrics.counter("panics"))
		assert.Equal(t, 1, metrics.counter("retries/SyncPod"))

		time.Sleep(2 * time.Second) // the backoff
		assert.Equal(t, "sync:create=panic sync:sync", r.trace("p"), "retried with backoff")
		calls := r.f.CallsFor("p")
		between(t, calls[1].Time.Sub(calls[0].Time), time.Second, 1500*time.Millisecond, "backoff")

		r.f.Next("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Panic: errBoom})
		r.f.Next("p", podworker.HookSyncTerminatedPod, podworkertest.Result{Panic: 42})
		r.kill(p, nil)
		time.Sleep(time.Minute)
		assert.Equal(t, "sync:create=panic sync:sync kill(30)=panic kill(30) terminated=panic terminated", r.trace("p"))
		assert.True(t, r.info("p").Finished)
		assert.Equal(t, 3, metrics.counter("panics"))

		r.stop() // Run returns cleanly (nil; Start reports any error)
		require.ErrorIs(t, r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("q")}), podworker.ErrStopped)
	})
}

// D14: the engine never writes to the caller's KillPodOptions; the kubelet
// writes the effective grace period back into its override. Read the
// effective value with Pod (PodInfo.GracePeriod).
func TestDecisionD14_CallersKillPodOptionsAreNeverWritten(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		p := mkPod("p")
		r.started(p)
		g := r.hold("p", podworker.HookSyncTerminatingPod)
		first := i64(0)
		ko := &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: first}
		before := *ko
		r.kill(p, ko)
		r.entered(g)
		assert.Equal(t, int64(0), *first, "the effective grace (1) is read with Pod, not written back")
		assert.Equal(t, before, *ko)
		assert.Equal(t, int64(1), r.info("p").GracePeriod)

		// A longer request later is ignored (D1), and not rewritten either.
		later := i64(20)
		require.NoError(t, r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: p, KillPodOptions: &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: later}}))
		assert.Equal(t, int64(20), *later)
		g.Release()
		r.settle()
	})
}

func TestShutdown(t *testing.T) {
	t.Run("Run returns only after every hook returned, even one that ignores ctx", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := newRig(t, podworker.Options[struct{}]{})
			stuck := r.f.HoldUncancelable("stuck", podworker.HookSyncPod)
			polite := r.hold("polite", podworker.HookSyncTerminatingPod)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.w.Run(ctx) }()
			r.update(podworker.SyncPodCreate, mkPod("stuck"))
			r.kill(mkPod("polite"), nil)
			r.entered(stuck)
			r.entered(polite)
			cancel()
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("Run returned %v while a hook still ran", err)
			default:
			}
			requireClosed(t, polite.Returned())
			assert.True(t, r.f.CallsFor("polite")[0].Canceled, "a running hook's ctx is cancelled at shutdown")
			assert.Equal(t, 1, r.f.InFlight())
			stuck.Release()
			require.NoError(t, <-done)
			assert.Equal(t, 0, r.f.InFlight())

			// Afterwards: ErrStopped, the window still answers, and nothing more runs.
			require.ErrorIs(t, r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: mkPod("stuck")}), podworker.ErrStopped)
			require.ErrorIs(t, r.w.KillPod(r.ctx, mkPod("stuck"), podworker.KillPodOptions{}), podworker.ErrStopped)
			require.ErrorIs(t, r.w.Run(context.Background()), podworker.ErrStopped)
			assert.True(t, r.w.CouldHaveRunningContainers("polite"))
			assert.Equal(t, podworker.StageTerminating, r.info("polite").Stage)
			_, _, err := r.w.WaitFor(r.ctx, "polite", func(info podworker.PodInfo, _ bool) bool { return info.Finished })
			require.ErrorIs(t, err, podworker.ErrStopped)
			time.Sleep(time.Hour)
			assert.Equal(t, "kill(30)=canceled", r.trace("polite"), "no retry after shutdown")
		})
	})
	t.Run("no goroutine is left", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			before := bubbleGoroutines()
			r := startRig(t, podworker.Options[struct{}]{ResyncInterval: time.Second})
			for i := range 50 {
				r.update(podworker.SyncPodCreate, mkPod(fmt.Sprint(i)))
			}
			r.f.Always(podworkertest.AnyUID, podworker.HookSyncTerminatingPod, podworkertest.Result{Err: errBoom})
			for i := range 25 {
				r.kill(mkPod(fmt.Sprint(i)), nil)
			}
			g := r.hold("49", podworker.HookSyncPod)
			time.Sleep(5 * time.Second)
			r.entered(g)
			r.w.Subscribe(make(chan podworker.Transition, 1))
			r.stop()
			// Goroutines that are done may still be returning: settle, and
			// anything left is blocked for good, a leak.
			r.settle()
			assert.Equal(t, before, bubbleGoroutines())
			// Leaving the bubble also fails if any goroutine it started is
			// still there.
		})
	})
	t.Run("KillPod waiting when Run stops returns ErrStopped", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			r.f.Always("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Err: errBoom})
			res := make(chan error, 1)
			go func() { res <- r.w.KillPod(context.Background(), mkPod("p"), podworker.KillPodOptions{}) }()
			r.settle()
			r.stop()
			require.ErrorIs(t, <-res, podworker.ErrStopped)
		})
	})
	t.Run("a second Run while running is an error", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			r.settle()
			err := r.w.Run(context.Background())
			require.Error(t, err)
			require.NotErrorIs(t, err, podworker.ErrStopped)
		})
	})
}
