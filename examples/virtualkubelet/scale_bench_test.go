package virtualkubelet_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
)

// The scale benchmark's client limits, the same for both providers and set
// explicitly (client-go's default of 5 QPS would make 5,000 status writes
// take over 15 minutes).
const (
	// scaleCreateQPS and scaleCreateBurst limit the benchmark's own client,
	// which creates the pods.
	scaleCreateQPS, scaleCreateBurst = 200, 400
	// scaleNodeQPS and scaleNodeBurst limit the virtual node's client:
	// podkit's node through rest.Config, virtual-kubelet's program through
	// a one-line patch of its client set at build time (it has no flag).
	scaleNodeQPS, scaleNodeBurst = 100, 200
	// scaleWorkers is virtual-kubelet's pod sync workers on both nodes
	// (its program's default is 10): each waits for one API call at a
	// time, so on a loaded machine they, not the QPS, bound the rate.
	scaleWorkers = 32
	// scaleCreators is how many goroutines share the creation client.
	scaleCreators = 32
	// scaleQueueQPS and scaleQueueBurst are the bucket of virtual-kubelet's
	// pod controller queues on both nodes (PodControllerConfig's
	// SyncPodsFromKubernetes, DeletePodsFromKubernetes and
	// SyncPodStatusFromProvider rate limiters; the per-item retry backoff
	// stays client-go's). Their default, client-go's controller rate
	// limiter, lets 10 pods a second through after a burst of 100, which
	// alone sets a 5,000-pod node's pace; PODKIT_VK_SCALE_QUEUE=default
	// keeps that default instead.
	scaleQueueQPS, scaleQueueBurst = 1000, 1000
	// scalePatience bounds each wait of an iteration (all Running, all
	// gone).
	scalePatience = 20 * time.Minute
)

// envScalePods sets the benchmark's pod count (default 5,000): 500 finds
// the costs in a minute.
const envScalePods = "PODKIT_VK_SCALE_PODS"

// envScaleQueue, set to "default", leaves virtual-kubelet's pod controller
// queues at their default rate limiter on both nodes (scaleQueueQPS).
const envScaleQueue = "PODKIT_VK_SCALE_QUEUE"

// envScaleMock, set to "unpatched", builds virtual-kubelet's mock provider
// without the lock of its pods map (patchMockPodsLock): with the
// benchmark's queues (scaleQueueQPS) its program then dies of its own
// data race after a few hundred pods.
const envScaleMock = "PODKIT_VK_SCALE_MOCK"

const (
	scalePodkitNode = "vk-scale-podkit"
	scaleMockNode   = "vk-scale-mock"
	scaleLabel      = "podkit.io/scale"
)

// BenchmarkVirtualNode5000 puts 5,000 pods (PODKIT_VK_SCALE_PODS) on one
// virtual-kubelet node, in one real cluster (clustertest's control plane
// in a child process), first with podkit's provider over simcloud (the
// node in this process), then with virtual-kubelet's own mock provider
// (its program, in a child process), each with the same client limits
// (scaleNodeQPS, scaleNodeBurst) and pod sync workers (scaleWorkers). The
// mock's program is built with its pods map behind a lock
// (patchMockPodsLock; PODKIT_VK_SCALE_MOCK=unpatched leaves it out): the
// map has none upstream, and its workers' race on it kills the program
// once pods come faster than the default queues' 10 a second. The pods are
// bound by spec.nodeName (no scheduler) and created by scaleCreators
// goroutines sharing one client limited to scaleCreateQPS and
// scaleCreateBurst. Each iteration creates the pods, waits until a watch
// sees every one Running, deletes them all with one DeleteCollection and
// waits until the watch sees every one gone. It reports:
//
//   - all-running-s: from the first create until the last pod is Running;
//     p50-s, p99-s: each pod's time from just before its create call to
//     the watch event showing it Running;
//   - delete-s: from the DeleteCollection until the last pod is gone;
//   - req/pod, delete-req/pod: the node's API requests while the pods
//     started (and while they went), per pod, counted by a counting
//     http.RoundTripper (podkit's: in the node's rest.Config; the mock's:
//     in a reverse proxy in this process that its kubeconfig points to);
//     the split by verb and resource is logged;
//   - podkit: heap-MiB, the heap in use after a GC with all pods Running,
//     less the heap before the node started (the provider, simcloud,
//     virtual-kubelet's controllers and informers: the node is in this
//     process), heap-after-delete-MiB, the same once the pods are gone,
//     and rss-MiB, this process's RSS growth over the same span (the
//     benchmark's own watch is in it too);
//   - mock: rss-MiB, the program's RSS with all pods Running, and
//     rss-idle-MiB, its RSS before the first pod.
func BenchmarkVirtualNode5000(b *testing.B) {
	pods := 5000
	if s := os.Getenv(envScalePods); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive pod count", envScalePods, s)
		}
		pods = n
	}
	queue := queueLimits{qps: scaleQueueQPS, burst: scaleQueueBurst}
	switch v := os.Getenv(envScaleQueue); v {
	case "":
	case "default":
		queue = queueLimits{}
	default:
		b.Fatalf("%s=%q: want \"default\" or nothing", envScaleQueue, v)
	}
	podsLock := true
	switch v := os.Getenv(envScaleMock); v {
	case "":
	case "unpatched":
		podsLock = false
	default:
		b.Fatalf("%s=%q: want \"unpatched\" or nothing", envScaleMock, v)
	}
	mockBinary := buildMockWithLimits(b, mockBuild{qps: scaleNodeQPS, burst: scaleNodeBurst, queue: queue, podsLock: podsLock})
	podkitRequests, mockRequests := newRequestCounter(), newRequestCounter()
	var mockPID atomic.Int64
	var mockKubeconfig string
	mockLog := &lockedBuffer{}
	podkit := podkitNode(nodeOptions{
		qps: scaleNodeQPS, burst: scaleNodeBurst, workers: scaleWorkers, queue: queue, wrap: podkitRequests.wrap,
		cloud: simcloud.Options{MaxCalls: 1024},
	})
	c := startCluster(b, func(env clustertest.NodeEnv) (clustertest.Agent, error) {
		if env.Name == scaleMockNode {
			return mockAgent{
				binary: mockBinary, kubeconfig: mockKubeconfig, env: env, log: mockLog,
				pods: strconv.Itoa(2 * pods), workers: scaleWorkers,
				started: func(pid int) { mockPID.Store(int64(pid)) },
			}, nil
		}
		return podkit(env)
	})
	creator := rest.CopyConfig(c.AdminConfig())
	creator.QPS, creator.Burst = scaleCreateQPS, scaleCreateBurst
	creatorClient, err := kubernetes.NewForConfig(creator)
	if err != nil {
		b.Fatal(err)
	}
	mockPods := "locked (patched)"
	if !podsLock {
		mockPods = "unlocked (unpatched)"
	}
	b.Logf("%d pods; creation client %d QPS (burst %d), %d goroutines; node client %d QPS (burst %d), %d pod sync workers, pod controller queues %s; mock's pods map %s; load average %s",
		pods, scaleCreateQPS, scaleCreateBurst, scaleCreators, scaleNodeQPS, scaleNodeBurst, scaleWorkers, queue, mockPods, loadAverage())

	b.Run("podkit", func(b *testing.B) {
		heapBefore, rssBefore := heapInUse(), rssOf(os.Getpid())
		n := c.addVirtualNode(b, scalePodkitNode)
		defer func() {
			if err := n.StopAgent(); err != nil {
				b.Errorf("stopping the podkit node: %v", err)
			}
		}()
		for range b.N {
			r := runScale(b, c, creatorClient, n, pods, podkitRequests, func() {
				b.ReportMetric(mib(heapInUse()-heapBefore), "heap-MiB")
				b.ReportMetric(mib(rssOf(os.Getpid())-rssBefore), "rss-MiB")
			})
			r.report(b)
			b.ReportMetric(mib(heapInUse()-heapBefore), "heap-after-delete-MiB")
		}
	})
	b.Run("mock", func(b *testing.B) {
		proxy := startCountingProxy(b, c.AdminConfig(), mockRequests)
		mockKubeconfig = writeProxyKubeconfig(b, proxy)
		n := c.addVirtualNode(b, scaleMockNode)
		defer func() {
			if err := n.StopAgent(); err != nil {
				b.Errorf("stopping the mock node: %v", err)
			}
			if b.Failed() {
				b.Logf("virtual-kubelet (mock) output:\n%s", mockLog.String())
			}
		}()
		pid := int(mockPID.Load())
		b.ReportMetric(mib(rssOf(pid)), "rss-idle-MiB")
		for range b.N {
			r := runScale(b, c, creatorClient, n, pods, mockRequests, func() {
				b.ReportMetric(mib(rssOf(pid)), "rss-MiB")
			})
			r.report(b)
		}
	})
}

// scaleResult is what one iteration measured.
type scaleResult struct {
	pods                    int
	allRunning, deleted     time.Duration
	startup                 []time.Duration // per pod, sorted
	startReqs, deleteReqs   int
	startSplit, deleteSplit map[string]int
}

func (r scaleResult) report(b *testing.B) {
	b.ReportMetric(r.allRunning.Seconds(), "all-running-s")
	b.ReportMetric(percentile(r.startup, 50).Seconds(), "p50-s")
	b.ReportMetric(percentile(r.startup, 99).Seconds(), "p99-s")
	b.ReportMetric(r.deleted.Seconds(), "delete-s")
	b.ReportMetric(float64(r.startReqs)/float64(r.pods), "req/pod")
	b.ReportMetric(float64(r.deleteReqs)/float64(r.pods), "delete-req/pod")
	b.Logf("node requests while %d pods started (%v): %d, %s", r.pods, r.allRunning, r.startReqs, formatSplit(r.startSplit))
	b.Logf("node requests while they went (%v): %d, %s", r.deleted, r.deleteReqs, formatSplit(r.deleteSplit))
	b.Logf("load average %s", loadAverage())
}

// runScale runs one iteration on the node n: creates pods, waits until all
// are Running, calls running, deletes them and waits until all are gone.
// An agent that stops on its own fails the iteration at once, with its
// error (the mock's output), instead of at the end of scalePatience.
func runScale(b *testing.B, c *vkCluster, client kubernetes.Interface, n *clustertest.Node, pods int, requests *requestCounter, running func()) scaleResult {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*scalePatience)
	defer cancel()
	node := n.Name()
	w := watchNode(ctx, b, c.Admin(), node)
	defer w.stop()
	w.agentErr = n.AgentErr

	names := make([]string, pods)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d", node, i)
	}
	requests.reset()
	start := time.Now()
	createdAt := make([]time.Time, pods)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, scaleCreators)
	for range scaleCreators {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= pods {
					return
				}
				createdAt[i] = time.Now()
				if _, err := client.CoreV1().Pods("default").Create(ctx, scalePod(names[i], node), metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("creating pod %s: %w", names[i], err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	runningAt := w.waitRunning(b, pods, scalePatience)
	r := scaleResult{pods: pods}
	last := start
	for i, name := range names {
		at := runningAt[name]
		r.startup = append(r.startup, at.Sub(createdAt[i]))
		last = later(last, at)
	}
	r.allRunning = last.Sub(start)
	slices.Sort(r.startup)
	r.startSplit = requests.snapshot()
	r.startReqs = total(r.startSplit)
	running()

	requests.reset()
	start = time.Now()
	err := client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: scaleLabel + "=" + node})
	if err != nil {
		b.Fatalf("deleting the pods: %v", err)
	}
	w.waitGone(b, pods, scalePatience)
	r.deleted = time.Since(start)
	r.deleteSplit = requests.snapshot()
	r.deleteReqs = total(r.deleteSplit)
	return r
}

// scalePod is a pod bound to node (spec.nodeName: no scheduler), with one
// container, a grace period of 1 second and no service account token, tolerating every taint so that
// a starved node's NotReady taint evicts nothing.
func scalePod(name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{scaleLabel: node}},
		Spec: v1.PodSpec{
			// virtual-kubelet removes a deleted pod's API object only once
			// its grace period ran out, whatever the provider did: 1 second
			// lets delete-s measure the node rather than the grace.
			TerminationGracePeriodSeconds: new(int64(1)),
			NodeName:                      node,
			AutomountServiceAccountToken:  new(false),
			Tolerations:                   []v1.Toleration{{Operator: v1.TolerationOpExists}},
			Containers:                    []v1.Container{{Name: "app", Image: "nginx"}},
		},
	}
}

// nodeWatch follows node's pods: when each was first seen Running, and
// how many are gone.
type nodeWatch struct {
	stop func()
	// agentErr, when set, is the node agent's error once it stopped on
	// its own (clustertest.Node.AgentErr); a wait checks it every second.
	agentErr func() error
	mu       sync.Mutex
	running  map[string]time.Time
	gone     int
	changed  chan struct{}
}

func watchNode(ctx context.Context, b *testing.B, client kubernetes.Interface, node string) *nodeWatch {
	b.Helper()
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	list, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		b.Fatalf("listing node %s's pods: %v", node, err)
	}
	if len(list.Items) > 0 {
		b.Fatalf("node %s has %d pods before the iteration", node, len(list.Items))
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.CoreV1().Pods("").Watch(ctx, o)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	w := &nodeWatch{stop: rw.Stop, running: map[string]time.Time{}, changed: make(chan struct{}, 1)}
	go func() {
		for ev := range rw.ResultChan() {
			pod, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			w.mu.Lock()
			switch {
			case ev.Type == watch.Deleted:
				w.gone++
			case pod.Status.Phase == v1.PodRunning:
				if _, seen := w.running[pod.Name]; !seen {
					w.running[pod.Name] = now
				}
			}
			w.mu.Unlock()
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
	}()
	return w
}

func (w *nodeWatch) wait(b *testing.B, what string, patience time.Duration, done func() (int, bool)) {
	b.Helper()
	timeout := time.NewTimer(patience)
	defer timeout.Stop()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		w.mu.Lock()
		n, ok := done()
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-w.changed:
		case <-check.C:
			if w.agentErr == nil {
				continue
			}
			if err := w.agentErr(); err != nil {
				b.Fatalf("waiting for the pods to be %s (%d are): %v", what, n, err)
			}
		case <-timeout.C:
			b.Fatalf("after %v, %d pods %s", patience, n, what)
		}
	}
}

func (w *nodeWatch) waitRunning(b *testing.B, pods int, patience time.Duration) map[string]time.Time {
	w.wait(b, "Running", patience, func() (int, bool) { return len(w.running), len(w.running) >= pods })
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.running)
}

func (w *nodeWatch) waitGone(b *testing.B, pods int, patience time.Duration) {
	w.wait(b, "gone", patience, func() (int, bool) { return w.gone, w.gone >= pods })
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, (len(sorted)*p+99)/100-1)]
}

// requestCounter counts API requests by verb and resource.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func newRequestCounter() *requestCounter { return &requestCounter{n: map[string]int{}} }

// wrap returns rt counting every request it sends.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		c.add(requestKind(r))
		return rt.RoundTrip(r)
	})
}

func (c *requestCounter) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[kind]++
}

func (c *requestCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.n)
}

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
