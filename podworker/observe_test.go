package podworker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// fakeMetrics is a MetricsProvider that keeps every value, by name:
// "sync/<state>" and "dispatch" histograms, "retries/<state>" and "panics"
// counters, "pods/<stage>" gauges.
type fakeMetrics struct {
	mu     sync.Mutex
	values map[string][]float64
	counts map[string]int
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{values: map[string][]float64{}, counts: map[string]int{}}
}

type fakeMetric struct {
	m    *fakeMetrics
	name string
}

func (f fakeMetric) Observe(v float64) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.m.values[f.name] = append(f.m.values[f.name], v)
}

func (f fakeMetric) Inc() { f.add(1) }
func (f fakeMetric) Dec() { f.add(-1) }
func (f fakeMetric) add(d int) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.m.counts[f.name] += d
}

func (m *fakeMetrics) NewSyncDurationMetric(phase podworker.Hook) podworker.HistogramMetric {
	return fakeMetric{m, "sync/" + phase.String()}
}
func (m *fakeMetrics) NewDispatchLatencyMetric() podworker.HistogramMetric {
	return fakeMetric{m, "dispatch"}
}
func (m *fakeMetrics) NewRetriesMetric(phase podworker.Hook) podworker.CounterMetric {
	return fakeMetric{m, "retries/" + phase.String()}
}
func (m *fakeMetrics) NewPanicsMetric() podworker.CounterMetric { return fakeMetric{m, "panics"} }
func (m *fakeMetrics) NewSlowHooksMetric() podworker.CounterMetric {
	return fakeMetric{m, "slowHooks"}
}
func (m *fakeMetrics) NewPodsMetric(stage podworker.Stage) podworker.GaugeMetric {
	return fakeMetric{m, "pods/" + stage.String()}
}

func (m *fakeMetrics) counter(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[name]
}

func (m *fakeMetrics) observed(name string) []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]float64(nil), m.values[name]...)
}

// gauges returns every non-zero pods/<stage> gauge.
func (m *fakeMetrics) gauges() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.counts {
		if len(k) > 5 && k[:5] == "pods/" && v != 0 {
			out[k[5:]] = v
		}
	}
	return out
}

func TestMetrics(t *testing.T) {
	bubble(t, func(t *testing.T) {
		m := newFakeMetrics()
		r := startRig(t, podworker.Options[struct{}]{Metrics: m, BackOff: time.Second})

		// Dispatch latency runs from the update's StartTime.
		start := time.Now().Add(-3 * time.Second)
		r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("a"), StartTime: start})
		r.settle()
		assert.Equal(t, []float64{3}, m.observed("dispatch"))
		assert.Equal(t, map[string]int{"syncing": 1}, m.gauges())

		// Sync duration by phase, measured on the engine's clock.
		gs := r.hold("a", podworker.HookSyncTerminatingPod)
		r.kill(mkPod("a"), nil)
		r.entered(gs)
		assert.Equal(t, map[string]int{"terminating": 1}, m.gauges())
		time.Sleep(4 * time.Second)
		gs.Release()
		r.settle()
		assert.Equal(t, []float64{0}, m.observed("sync/SyncPod"))
		assert.Equal(t, []float64{4}, m.observed("sync/SyncTerminatingPod"))
		assert.Equal(t, []float64{0}, m.observed("sync/SyncTerminatedPod"))
		assert.Equal(t, map[string]int{"finished": 1}, m.gauges())

		// Retries by phase, and panics.
		r.f.Next("b", podworker.HookSyncPod, podworkertest.Result{Err: errBoom}, podworkertest.Result{Panic: "x"})
		r.f.Next("b", podworker.HookSyncTerminatedPod, podworkertest.Result{Err: errBoom})
		r.update(podworker.SyncPodCreate, mkPod("b"))
		time.Sleep(10 * time.Second)
		r.kill(mkPod("b"), nil)
		time.Sleep(10 * time.Second)
		assert.Equal(t, "sync:create=error sync:sync=panic sync:sync kill(30) terminated=error terminated", r.trace("b"))
		assert.Equal(t, 2, m.counter("retries/SyncPod"))
		assert.Equal(t, 0, m.counter("retries/SyncTerminatingPod"))
		assert.Equal(t, 1, m.counter("retries/SyncTerminatedPod"))
		assert.Equal(t, 1, m.counter("panics"))

		// Pods by stage follow every worker, including a waiting static
		// pod, a runtime-only pod, and workers being forgotten.
		r.started(mkStatic("h", "web"))
		r.update(podworker.SyncPodCreate, mkStatic("w", "web"))
		r.settle()
		assert.Equal(t, map[string]int{"finished": 2, "syncing": 1, "not-started": 1}, m.gauges())
		r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: &podworker.RuntimePod{UID: "rt", Namespace: "ns", Name: "rt"}})
		r.settle()
		r.absent("rt")
		assert.Equal(t, map[string]int{"finished": 2, "syncing": 1, "not-started": 1}, m.gauges(), "a runtime-only pod leaves no count behind")

		r.w.SyncKnownPods([]*v1.Pod{mkStatic("h", "web"), mkStatic("w", "web")})
		assert.Equal(t, map[string]int{"syncing": 1, "not-started": 1}, m.gauges(), "forgotten workers are not counted")
	})
}

func TestSubscribe(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		ch := make(chan podworker.Transition, 100)
		sub := r.w.Subscribe(ch)
		r.started(mkPod("a"))
		r.kill(mkPod("a"), nil)
		r.settle()
		r.w.SyncKnownPods(nil)
		r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: &podworker.RuntimePod{UID: "rt", Namespace: "ns", Name: "rt"}})
		r.settle()

		var got []string
		now := time.Now()
	loop:
		for {
			select {
			case tr := <-ch:
				got = append(got, fmt.Sprintf("%s %s>%s", tr.UID, tr.From, tr.To))
				assert.Equal(t, now, tr.Time, "stamped with the engine's clock")
				assert.Equal(t, map[types.UID]string{"a": "a_ns", "rt": "rt_ns"}[tr.UID], tr.FullName)
			default:
				break loop
			}
		}
		assert.Equal(t, []string{
			"a absent>not-started",
			"a not-started>syncing",
			"a syncing>termination-requested",
			"a termination-requested>terminating",
			"a terminating>terminated",
			"a terminated>finished",
			"a finished>absent",
			"rt absent>termination-requested",
			"rt termination-requested>terminating",
			"rt terminating>absent",
		}, got)
		assert.Zero(t, sub.Dropped())

		// Close stops delivery.
		sub.Close()
		sub.Close()
		r.started(mkPod("b"))
		select {
		case tr := <-ch:
			t.Fatalf("got %v after Close", tr)
		default:
		}
	})
}

func TestSubscribeNeverBlocksAndCountsDrops(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		ch := make(chan podworker.Transition, 1)
		sub := r.w.Subscribe(ch)
		r.started(mkPod("a")) // absent>not-started fits; not-started>syncing is dropped
		r.kill(mkPod("a"), nil)
		r.settle()
		assert.True(t, r.info("a").Finished, "a full channel does not stop the engine")
		assert.Equal(t, uint64(5), sub.Dropped())
		assert.Equal(t, podworker.StageNotStarted, (<-ch).To)
	})
}

func TestWaitFor(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		g := r.hold("a", podworker.HookSyncTerminatingPod)
		type res struct {
			info podworker.PodInfo
			ok   bool
			err  error
		}
		out := make(chan res, 1)
		go func() {
			info, ok, err := r.w.WaitFor(r.ctx, "a", func(info podworker.PodInfo, ok bool) bool { return ok && info.Stage >= podworker.StageTerminated })
			out <- res{info, ok, err}
		}()
		r.started(mkPod("a"))
		r.kill(mkPod("a"), nil)
		r.entered(g)
		select {
		case <-out:
			t.Fatal("WaitFor returned before its condition held")
		default:
		}
		g.Release()
		got := <-out
		require.NoError(t, got.err)
		require.True(t, got.ok)
		assert.GreaterOrEqual(t, got.info.Stage, podworker.StageTerminated)

		// A condition already true returns at once, also for absent UIDs.
		_, ok, err := r.w.WaitFor(r.ctx, "nobody", func(_ podworker.PodInfo, ok bool) bool { return !ok })
		require.NoError(t, err)
		require.False(t, ok)

		ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
		defer cancel()
		_, _, err = r.w.WaitFor(ctx, "nobody", func(_ podworker.PodInfo, ok bool) bool { return ok })
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestWaitForStage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := podworkertest.NewFakeSyncer[struct{}]()
		w, err := podworker.New[struct{}](f, podworker.Options[struct{}]{})
		require.NoError(t, err)
		stop := podworkertest.Start(t, w)
		ctx := context.Background()
		pod := podworkertest.NewPod("a", "ns", "a")

		g := f.Hold("a", podworker.HookSyncTerminatedPod)
		require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
		info, err := w.WaitForStage(ctx, "a", podworker.StageSyncing)
		require.NoError(t, err)
		require.GreaterOrEqual(t, info.Stage, podworker.StageSyncing)

		require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: pod}))
		info, err = w.WaitForStage(ctx, "a", podworker.StageTerminated)
		require.NoError(t, err)
		require.Equal(t, podworker.StageTerminated, info.Stage, "SyncTerminatedPod is held")
		require.NoError(t, g.Wait(ctx))
		g.Release()
		info, err = w.WaitForStage(ctx, "a", podworker.StageFinished)
		require.NoError(t, err)
		require.True(t, info.Finished)

		w.SyncKnownPods(nil)
		_, err = w.WaitForStage(ctx, "a", podworker.StageAbsent)
		require.NoError(t, err)

		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = w.WaitForStage(short, "never", podworker.StageSyncing)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "last seen absent")

		stop()
		_, err = w.WaitForStage(ctx, "never", podworker.StageSyncing)
		require.ErrorIs(t, err, podworker.ErrStopped)
	})
}

// WaitFor wakes when a hook returns, even when the stage stays: a
// condition on the sync outcome is met.
func TestWaitForWakesWhenAHookReturns(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		p := mkPod("p")
		r.started(p)
		before := r.info("p").LastSyncTime
		g := r.hold("p", podworker.HookSyncPod)
		require.True(t, r.w.Resync("p"))
		r.entered(g)
		got := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _, err := r.w.WaitFor(ctx, "p", func(info podworker.PodInfo, ok bool) bool {
				return ok && info.LastSyncTime.After(before)
			})
			got <- err
		}()
		time.Sleep(time.Second)
		g.Release()
		require.NoError(t, <-got, "the waiter saw the hook return")
		assert.Equal(t, podworker.StageSyncing, r.info("p").Stage, "with no stage change")
	})
}
