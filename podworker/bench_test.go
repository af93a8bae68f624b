package podworker_test

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// The benchmarks drive the real engine with no-op hooks. Completion is
// observed through counters in the hooks and a channel closed at a target,
// never by sleeping.

var benchSizes = []int{1_000, 10_000, 100_000}

var benchCap = 0

func benchPods(n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	grace := int64(30)
	for i := range pods {
		pods[i] = &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "bench", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &grace},
		}
	}
	return pods
}

// counter closes reached when it has counted to target. It may be armed
// again while hooks that counted before are still returning from add: such
// a late add never closes the new channel (it checks the count again under
// the lock), and target is atomic, so that -race passes too.
type counter struct {
	n       atomic.Int64
	target  atomic.Int64
	mu      sync.Mutex
	reached chan struct{}
}

func (c *counter) arm(target int64) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n.Store(0)
	c.target.Store(target)
	c.reached = make(chan struct{})
	return c.reached
}

func (c *counter) add() {
	if v := c.n.Add(1); v == c.target.Load() {
		c.mu.Lock()
		if c.reached != nil && c.n.Load() >= c.target.Load() {
			close(c.reached)
			c.reached = nil
		}
		c.mu.Unlock()
	}
}

type benchEngine struct {
	w                  *podworker.PodWorkers[struct{}]
	synced, terminated counter
	cancel             context.CancelFunc
	done               chan error
}

func startBench(tb testing.TB, opts podworker.Options[struct{}]) *benchEngine {
	e := &benchEngine{done: make(chan error, 1)}
	e.synced.arm(-1)
	e.terminated.arm(-1)
	syncer := podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(context.Context, podworker.UpdateType, *v1.Pod, *v1.Pod, struct{}) (bool, error) {
			e.synced.add()
			return false, nil
		},
		SyncTerminatingPodFunc: func(context.Context, *v1.Pod, struct{}, int64, func(*v1.PodStatus)) error {
			return nil // SyncPod starts nothing: nothing to stop
		},
		SyncTerminatedPodFunc: func(context.Context, *v1.Pod, struct{}) error {
			e.terminated.add()
			return nil
		},
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = time.Hour
	}
	w, err := podworker.New[struct{}](syncer, opts)
	if err != nil {
		tb.Fatal(err)
	}
	e.w = w
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() { e.done <- w.Run(ctx) }()
	return e
}

func (e *benchEngine) stop(tb testing.TB) {
	e.cancel()
	if err := <-e.done; err != nil {
		tb.Fatal(err)
	}
}

func (e *benchEngine) update(tb testing.TB, t podworker.UpdateType, p *v1.Pod) {
	if err := e.w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: t, Pod: p}); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkFullLifecycle: each op is one pod created, synced, killed,
// terminated, cleaned up and forgotten, in rounds of n pods at once.
func BenchmarkFullLifecycle(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := benchPods(n)
			e := startBench(b, podworker.Options[struct{}]{MaxConcurrentSyncs: benchCap})
			defer e.stop(b)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += n {
				round := min(n, b.N-done)
				synced := e.synced.arm(int64(round))
				for _, p := range pods[:round] {
					e.update(b, podworker.SyncPodCreate, p)
				}
				<-synced
				finished := e.terminated.arm(int64(round))
				for _, p := range pods[:round] {
					if err := e.w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: p}); err != nil {
						b.Fatal(err)
					}
				}
				<-finished
				// The last hooks have returned their counts; their workers
				// finish under the engine's lock a moment later.
				for len(e.w.SyncKnownPods(nil)) != 0 {
					runtime.Gosched()
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lifecycles/s")
		})
	}
}

// BenchmarkUpdatePodKnown: UpdatePod on pods the engine already runs, with
// no cap on hooks in flight. Each op is one UpdatePod call; hooks run
// concurrently and coalesce.
func BenchmarkUpdatePodKnown(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := benchPods(n)
			e := startBench(b, podworker.Options[struct{}]{})
			defer e.stop(b)
			synced := e.synced.arm(int64(n))
			for _, p := range pods {
				e.update(b, podworker.SyncPodCreate, p)
			}
			<-synced
			e.synced.arm(-1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				e.update(b, podworker.SyncPodUpdate, pods[i%n])
			}
			b.StopTimer()
			syncs := e.synced.n.Load()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
			b.ReportMetric(float64(syncs)/float64(b.N), "syncs/update")
		})
	}
}

// BenchmarkBurstCoalescing: every pod's SyncPod is held while a burst of
// updates arrives for every pod; only the newest update per pod may run
// when the hooks are released. Each op is one update of the burst, and the
// burst is done when every pod it touched has synced its newest update:
// that update carries a pod object of its own (Generation 1), which the
// hook counts, so the wait is a channel receive, not a poll of the engine.
func BenchmarkBurstCoalescing(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := benchPods(n)
			// newest[i] is pods[i] as the last update of a burst sends it.
			newest := benchPods(n)
			for _, p := range newest {
				p.Generation = 1
			}
			var gate atomic.Pointer[chan struct{}]
			var synced, newestSynced counter
			newestSynced.arm(-1)
			syncer := podworker.PodSyncerFuncs[struct{}]{
				SyncPodFunc: func(_ context.Context, _ podworker.UpdateType, pod *v1.Pod, _ *v1.Pod, _ struct{}) (bool, error) {
					if g := gate.Load(); g != nil {
						<-*g
					}
					synced.add()
					if pod.Generation == 1 {
						newestSynced.add()
					}
					return false, nil
				},
			}
			w, err := podworker.New[struct{}](syncer, podworker.Options[struct{}]{ResyncInterval: time.Hour, MaxConcurrentSyncs: 64})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			defer func() { cancel(); <-done }()
			first := synced.arm(int64(n))
			for _, p := range pods {
				_ = w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: p})
			}
			<-first
			b.ReportAllocs()
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				g := make(chan struct{})
				gate.Store(&g)
				burst := min(b.N-sent, 10*n)
				drained := newestSynced.arm(int64(min(burst, n)))
				for i := range burst {
					p := pods[i%n]
					if i >= burst-n { // the pod's last update of this burst
						p = newest[i%n]
					}
					_ = w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: p})
				}
				sent += burst
				// Release the held hooks; each pod ran at most the hook held at
				// the burst's start plus one coalesced sync, the last of them
				// with its newest pod.
				gate.Store(nil)
				close(g)
				<-drained
			}
			b.StopTimer()
			// Every sync of a burst came before its pod's newest one.
			syncs := synced.n.Load() - int64(n)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
			b.ReportMetric(float64(syncs)/float64(b.N), "syncs/update")
		})
	}
}

func allIdle(w *podworker.PodWorkers[struct{}]) bool {
	for _, p := range w.Pods() {
		if p.Working {
			return false
		}
	}
	return true
}

// BenchmarkDispatchLatency: the time from UpdatePod to the start of the
// hook that acts on it, with n pods known and one update at a time.
func BenchmarkDispatchLatency(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := benchPods(n)
			entered := make(chan time.Time, 1)
			var armed atomic.Bool
			syncer := podworker.PodSyncerFuncs[struct{}]{
				SyncPodFunc: func(context.Context, podworker.UpdateType, *v1.Pod, *v1.Pod, struct{}) (bool, error) {
					if armed.Load() {
						entered <- time.Now()
					}
					return false, nil
				},
			}
			w, err := podworker.New[struct{}](syncer, podworker.Options[struct{}]{ResyncInterval: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			defer func() { cancel(); <-done }()
			for _, p := range pods {
				_ = w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: p})
			}
			for !allIdle(w) {
				runtime.Gosched()
			}
			armed.Store(true)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				_ = w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: pods[i%n]})
				lat = append(lat, (<-entered).Sub(start))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// BenchmarkIdleFootprint: the heap and goroutines held by n synced, idle
// pods, and what is left once every one of them is forgotten. Each op is a
// full round at n pods.
func BenchmarkIdleFootprint(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := benchPods(n)
			var perPod, leftPerPod, goroutinesPerPod float64
			for range b.N {
				e := startBench(b, podworker.Options[struct{}]{})
				runtime.GC()
				base := heapInUse()
				baseG := runtime.NumGoroutine()
				synced := e.synced.arm(int64(n))
				for _, p := range pods {
					e.update(b, podworker.SyncPodCreate, p)
				}
				<-synced
				for !allIdle(e.w) {
					runtime.Gosched()
				}
				runtime.GC()
				perPod = float64(heapInUse()-base) / float64(n)
				goroutinesPerPod = float64(runtime.NumGoroutine()-baseG) / float64(n)
				finished := e.terminated.arm(int64(n))
				for _, p := range pods {
					e.update(b, podworker.SyncPodKill, p)
				}
				<-finished
				e.w.SyncKnownPods(nil)
				runtime.GC()
				leftPerPod = float64(heapInUse()-base) / float64(n)
				e.stop(b)
			}
			b.ReportMetric(perPod, "idle-B/pod")
			b.ReportMetric(goroutinesPerPod, "goroutines/pod")
			b.ReportMetric(leftPerPod, "forgotten-B/pod")
		})
	}
}

func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
