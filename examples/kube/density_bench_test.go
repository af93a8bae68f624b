package kube_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/clustertest"
)

// Density benchmark, as Kubernetes' scalability tests measure it
// (clusterloader2's density test, kubemark's hollow nodes): many nodes, 30
// pods on each, created at a steady rate, and the pod startup latency
// against the SLO (p99 of creation to Running, seen by a watch, at most
// 5 s). The sizes are flags, so that a small run finds the costs first:
//
//	go test -run '^$' -bench Density -benchtime 1x -args -density.nodes=10
//
// The nodes are hollow by default (-density.runtime=hollow, package
// hollowruntime: kubemark's hollow node, every pod through the agent's
// engine, status writes and events, no process): the process runtime
// (-density.runtime=process) gives every pod real processes, and 3,000
// of them do not fit this 2-core, 24 GiB machine.
var (
	densityRuntime     = flag.String("density.runtime", string(agent.RuntimeHollow), "BenchmarkDensity: the nodes' pod runtime, hollow or process, or kwok for kwok's nodes")
	densityNodes       = flag.Int("density.nodes", 100, "BenchmarkDensity: podkit nodes, one of them a podkit-agent process")
	densityPodsPerNode = flag.Int("density.pods-per-node", 30, "BenchmarkDensity: pods per node")
	densityRate        = flag.Int("density.rate", 20, "BenchmarkDensity: pods created per second")
	densityIdle        = flag.Duration("density.idle", 30*time.Second, "BenchmarkDensity: how long the cost of the nodes is measured once every pod runs")
)

// The density cluster's node-lifecycle timings: a hollow node's heartbeat
// is the kubelet's default (its Lease renewed every 10 s, its status
// patched on a change or every 5 minutes), and the controller manager
// gives a node starved of CPU minutes before it marks it unknown and
// evicts its pods, so that the benchmark measures the pods' start and not
// evictions.
const (
	densityHeartbeat    = 10 * time.Second
	densityStatusReport = 5 * time.Minute
	densityNodeGrace    = 5 * time.Minute
	densityEvictionSec  = 600
	// densityCreators is how many creations may be in flight at once.
	densityCreators = 20
)

// BenchmarkDensity starts a cluster of -density.nodes podkit nodes: all
// but one are agents in this process (clustertest's nodes, each a real
// agent with its own client, informers, runtime and state directory), the
// last one the podkit-agent command in a process of its own, all on the
// -density.runtime runtime. It then creates -density.pods-per-node pods
// per node at -density.rate pods per second (no node named: the scheduler
// places them; each one container "running" sleep) and reports:
//
//   - p50-s, p99-s, max-s: pod startup latency, from just before the
//     create call to the watch event that first shows the pod Running;
//     sched-p99-s the part until the watch sees it bound, and node-p99-s
//     the part from bound to Running;
//   - nodes, pods, and ready-s: how long the nodes took from AddNodes to
//     all of them Ready and schedulable;
//   - cpu-s/agent: CPU seconds (user+sys) of this process, from before the
//     nodes were added to every pod Running, divided by the in-process
//     agents (their heartbeats included; the benchmark's own creating and
//     watching client is counted too, so it is an upper bound);
//     idle-cpu-ms/s/agent the same over -density.idle once every pod
//     runs, per second;
//   - heap-MiB/agent and rss-MiB/agent: this process's live heap (after a
//     GC) and resident memory once every pod runs, less what they were
//     before the nodes, divided by the in-process agents;
//   - proc-rss-MiB, proc-cpu-s: the podkit-agent process's resident
//     memory and CPU seconds at that point, a true per-process figure
//     (its heartbeat is its own, at the same 10 s);
//   - cp-cpu-s: the control plane process's CPU seconds over the same
//     span as cpu-s/agent (etcd, API server, scheduler, controller
//     manager), to show where the two cores went;
//   - api-requests: the API server's requests over that span
//     (apiserver_request_total, every client's: nodes, scheduler,
//     controller manager, the benchmark), the largest by verb and
//     resource logged.
//
// Every run then logs what the nodes wrote (densityFidelity: how many pods
// have a pod IP, a host IP, Ready and their container running, the events
// from the nodes, and how long one pod's deletion with its default grace
// period took), after the figures are taken.
//
// -density.runtime=kwok runs the same cluster, pods and rate on kwok's
// nodes instead (runDensityKwok: kwok's controller, built at benchmark
// time, one process for all -density.nodes Nodes, which the benchmark
// creates); it reports kwok-cpu-s and kwok-rss-MiB for that process, and
// cpu-s/node, idle-cpu-ms/s/node and rss-MiB/node divided by the nodes.
// It skips when kwok cannot be built (-density.kwok-version).
//
// Each iteration is a new cluster; the figures are the last iteration's,
// and every iteration's are logged.
//
//	go test -run '^$' -bench Density -benchtime 1x
func BenchmarkDensity(b *testing.B) {
	nodes, perNode, rate := *densityNodes, *densityPodsPerNode, *densityRate
	if nodes < 2 || perNode < 1 || rate < 1 {
		b.Fatalf("density: need at least 2 nodes, 1 pod per node and 1 pod per second (have %d, %d, %d)", nodes, perNode, rate)
	}
	if *densityRuntime == densityRuntimeKwok {
		k, err := buildKwok(context.Background(), "go", *densityKwokVersion, b.TempDir())
		if err != nil {
			b.Skipf("-density.runtime=kwok: %v", err)
		}
		for i := range b.N {
			runDensityKwok(b, i, k, nodes, perNode, rate)
		}
		return
	}
	rt, err := agent.ParseRuntime(*densityRuntime)
	if err != nil {
		b.Fatalf("-density.runtime: %v", err)
	}
	for i := range b.N {
		runDensity(b, i, rt, nodes, perNode, rate)
	}
}

// runDensity is one iteration of BenchmarkDensity.
func runDensity(b *testing.B, iteration int, rt agent.Runtime, nodes, perNode, rate int) {
	b.StopTimer()
	ctx := context.Background()
	dir := b.TempDir()
	c := startDensityCluster(ctx, b, dir, densityAgent(rt))
	defer func() {
		if err := c.Close(); err != nil {
			b.Error(err)
		}
	}()
	controlPlane := childProcess(b, "podkit-controlp")
	buildOnce(b, agentPackage) // not while measuring
	inProcess := nodes - 1

	reqBefore := apiRequests(ctx, b, c.Admin())
	before := sampleSelf()
	cpBefore := processCPU(b, controlPlane)
	b.StartTimer()
	start := time.Now()
	if _, err := c.AddNodes(ctx, clustertest.Nodes(inProcess)...); err != nil {
		b.Fatal(err)
	}
	ready := time.Since(start)
	b.Logf("%d in-process nodes Ready and schedulable in %v", inProcess, ready.Round(time.Millisecond))
	procDir := filepath.Join(dir, "process-agent")
	if err := os.Mkdir(procDir, 0o700); err != nil {
		b.Fatal(err)
	}
	agentPID, stopAgent := startAgentProcess(b, c, fmt.Sprintf("node-%d", inProcess), procDir,
		"--heartbeat-interval", densityHeartbeat.String(), "--runtime", string(rt))
	defer stopAgent()
	idleNodes := sampleSelf()

	admin := creatorClient(b, c, rate)
	res := createDensityPods(b, admin, "density", nodes*perNode, rate)
	b.StopTimer()
	running := sampleSelf()
	cpRunning := processCPU(b, controlPlane)
	procRSS, procPeak := processMemory(b, agentPID)
	procCPU := processCPU(b, agentPID)
	reqRunning := apiRequests(ctx, b, c.Admin())

	// The steady state: every pod runs, nothing changes; what do the
	// nodes cost per second?
	time.Sleep(*densityIdle) // a measuring window, not a wait for an outcome
	idle := sampleSelf()
	cpIdle := processCPU(b, controlPlane)
	fid := densityFidelity(ctx, b, c.Admin(), "density")

	n := float64(inProcess)
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	res.report(b, nodes, ready)
	b.ReportMetric((running.cpu-before.cpu).Seconds()/n, "cpu-s/agent")
	b.ReportMetric(float64((idle.cpu-running.cpu).Milliseconds())/n/densityIdle.Seconds(), "idle-cpu-ms/s/agent")
	b.ReportMetric(mib(running.heap-before.heap)/n, "heap-MiB/agent")
	b.ReportMetric(mib(running.rss-before.rss)/n, "rss-MiB/agent")
	b.ReportMetric(mib(procRSS), "proc-rss-MiB")
	b.ReportMetric(procCPU.Seconds(), "proc-cpu-s")
	b.ReportMetric((cpRunning - cpBefore).Seconds(), "cp-cpu-s")
	reqs, reqTop := requestDelta(reqBefore, reqRunning)
	b.ReportMetric(reqs, "api-requests")

	b.Logf("iteration %d: %s runtime, %d in-process nodes and 1 podkit-agent process", iteration, rt, inProcess)
	b.Logf("iteration %d: %s", iteration, res.summary(nodes, rate))
	b.Logf("iteration %d: this process, %d agents: CPU %.1fs while the nodes started, %.1fs while the pods started, %.0f ms/s idle over %v; heap %d -> %d -> %d MiB, RSS %d -> %d -> %d MiB (before nodes, idle nodes, pods running)",
		iteration, inProcess, (idleNodes.cpu - before.cpu).Seconds(), (running.cpu - idleNodes.cpu).Seconds(),
		float64((idle.cpu-running.cpu).Milliseconds())/densityIdle.Seconds(), *densityIdle,
		before.heap>>20, idleNodes.heap>>20, running.heap>>20, before.rss>>20, idleNodes.rss>>20, running.rss>>20)
	b.Logf("iteration %d: the podkit-agent process (%d pods): RSS %d MiB (peak %d MiB), CPU %.1fs; the control plane: CPU %.1fs until every pod ran, %.0f ms/s idle",
		iteration, res.perNode[fmt.Sprintf("node-%d", inProcess)], procRSS>>20, procPeak>>20, procCPU.Seconds(),
		(cpRunning - cpBefore).Seconds(), float64((cpIdle-cpRunning).Milliseconds())/densityIdle.Seconds())
	b.Logf("iteration %d: the API server's requests (every client's) from AddNodes to every pod Running: %.0f; %s", iteration, reqs, reqTop)
	b.Logf("iteration %d: %s", iteration, fid)
	b.Logf("iteration %d: load average %s", iteration, loadAverage())
}

// densityRuntimeKwok is -density.runtime's value for kwok's nodes
// (runDensityKwok) instead of podkit's.
const densityRuntimeKwok = "kwok"

// startDensityCluster starts the density cluster, its control plane's
// log in dir and its state in memory, with the density node-lifecycle
// timings; newAgent builds its nodes' agents (nil: the cluster's
// default, for a cluster whose nodes are not clustertest's).
func startDensityCluster(ctx context.Context, b *testing.B, dir string, newAgent func(clustertest.NodeEnv) (clustertest.Agent, error)) *clustertest.Cluster {
	logs, err := os.Create(filepath.Join(dir, "cluster.log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { logs.Close() })
	// etcd's data in memory: on a disk shared with builds, its fsyncs
	// stall writes past etcd's request timeout at about a thousand pods,
	// and the benchmark would measure the disk.
	clusterDir, err := os.MkdirTemp(densityClusterParent(), "podkit-density-")
	if err != nil {
		b.Fatal(err)
	}
	// A Dir given is the caller's to remove, once Close ran: the
	// cleanup runs after the caller's deferred Close.
	b.Cleanup(func() { os.RemoveAll(clusterDir) })
	c, err := clustertest.Start(ctx, clustertest.Options{
		Dir:                      clusterDir,
		ControlPlaneLog:          logs,
		HeartbeatInterval:        densityHeartbeat,
		NodeStatusReportInterval: densityStatusReport,
		NodeMonitorGracePeriod:   densityNodeGrace,
		PodEvictionSeconds:       densityEvictionSec,
		NewAgent:                 newAgent,
	})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// densityAgent is the cluster's NewAgent for runtime rt.
func densityAgent(rt agent.Runtime) func(clustertest.NodeEnv) (clustertest.Agent, error) {
	if rt == agent.RuntimeHollow {
		return clustertest.HollowAgent
	}
	return clustertest.DefaultAgent
}

// creatorClient returns an administrator's clientset whose client-side
// rate limit is set for creating rate pods a second (client-go's default,
// 5 per second, would be the bottleneck).
func creatorClient(b *testing.B, c *clustertest.Cluster, rate int) kubernetes.Interface {
	cfg := c.AdminConfig()
	cfg.QPS = float32(2 * rate)
	cfg.Burst = 2 * rate
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// densityResult is what createDensityPods saw of each pod.
type densityResult struct {
	created, bound, running map[string]time.Time
	perNode                 map[string]int
	// retries counts the creations tried again after a server timeout.
	retries int
}

// latencies returns the pods' startup latencies, sorted.
func (r densityResult) latencies() []time.Duration {
	out := make([]time.Duration, 0, len(r.running))
	for name, at := range r.running {
		out = append(out, at.Sub(r.created[name]))
	}
	slices.Sort(out)
	return out
}

// stages returns, sorted, each pod's time from creation to the watch
// seeing it bound, and from then to the watch seeing it Running.
func (r densityResult) stages() (sched, node []time.Duration) {
	for name, at := range r.running {
		bound, ok := r.bound[name]
		if !ok {
			bound = at // first seen bound and Running in one event
		}
		sched = append(sched, bound.Sub(r.created[name]))
		node = append(node, at.Sub(bound))
	}
	slices.Sort(sched)
	slices.Sort(node)
	return sched, node
}

// quantile returns the p quantile of sorted, in seconds.
func quantile(sorted []time.Duration, p float64) float64 {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))].Seconds()
}

// report reports the pods' startup figures, the same on every side of
// the density benchmark: startup p50, p99 and max, created to bound and
// bound to Running p99, the pods and nodes, the nodes' time to Ready and
// the creations retried.
func (r densityResult) report(b *testing.B, nodes int, ready time.Duration) {
	lat := r.latencies()
	sched, node := r.stages()
	b.ReportMetric(quantile(lat, 0.50), "p50-s")
	b.ReportMetric(quantile(lat, 0.99), "p99-s")
	b.ReportMetric(lat[len(lat)-1].Seconds(), "max-s")
	b.ReportMetric(quantile(sched, 0.99), "sched-p99-s")
	b.ReportMetric(quantile(node, 0.99), "node-p99-s")
	b.ReportMetric(float64(len(lat)), "pods")
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(ready.Seconds(), "ready-s")
	b.ReportMetric(float64(r.retries), "create-retries")
}

// summary says the pods' startup figures in a line, for the log.
func (r densityResult) summary(nodes, rate int) string {
	lat := r.latencies()
	sched, node := r.stages()
	lo, hi := r.spread()
	return fmt.Sprintf("%d pods on %d nodes (%d to %d a node) at %d/s: startup p50 %.3fs p90 %.3fs p99 %.3fs max %.3fs; created->bound p99 %.3fs, bound->Running p99 %.3fs",
		len(lat), nodes, lo, hi, rate, quantile(lat, 0.5), quantile(lat, 0.9), quantile(lat, 0.99), lat[len(lat)-1].Seconds(), quantile(sched, 0.99), quantile(node, 0.99))
}

// spread returns the fewest and the most pods a node runs.
func (r densityResult) spread() (lo, hi int) {
	lo = -1
	for _, n := range r.perNode {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return lo, hi
}

// agentPackage is the podkit-agent command's package.
const agentPackage = "github.com/podkit/podkit/examples/kube/cmd/podkit-agent"

// densityTimeout bounds the pods' creation and start.
const densityTimeout = 15 * time.Minute

// createDensityPods creates total pods in the new namespace ns, rate a
// second, at most densityCreators in flight, and watches them until every
// one is Running.
func createDensityPods(b *testing.B, cs kubernetes.Interface, ns string, total, rate int) densityResult {
	ctx, cancel := context.WithTimeout(context.Background(), densityTimeout)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		b.Fatal(err)
	}
	// A watch the API server ends (a slow reader on a loaded machine) is
	// taken up again from the last resource version seen.
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns).Watch(ctx, opts)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()

	res := densityResult{
		created: make(map[string]time.Time, total),
		bound:   make(map[string]time.Time, total),
		running: make(map[string]time.Time, total),
		perNode: map[string]int{},
	}
	var mu sync.Mutex
	names := make(chan string)
	failed := make(chan error, densityCreators)
	var wg sync.WaitGroup
	for range densityCreators {
		wg.Go(func() {
			for name := range names {
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: scriptSpec("exec sleep 3600")}
				start := time.Now()
				retries, err := createRetrying(ctx, cs, ns, pod)
				if err != nil {
					failed <- fmt.Errorf("creating pod %s: %w", name, err)
					cancel()
					return
				}
				mu.Lock()
				res.created[name] = start
				res.retries += retries
				mu.Unlock()
			}
		})
	}
	go func() {
		defer close(names)
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		for i := range total {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			select {
			case names <- fmt.Sprintf("p-%04d", i):
			case <-ctx.Done():
				return
			}
		}
	}()

	for len(res.running) < total {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("the watch ended with %d of %d pods running", len(res.running), total)
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				if ev.Type == watch.Error {
					b.Fatalf("the watch of the pods failed: %v", ev.Object)
				}
				continue
			}
			now := time.Now()
			if _, seen := res.bound[p.Name]; !seen && p.Spec.NodeName != "" && p.Status.Phase != v1.PodRunning {
				res.bound[p.Name] = now
			}
			if p.Status.Phase != v1.PodRunning {
				continue
			}
			if _, seen := res.running[p.Name]; !seen {
				res.running[p.Name] = now
				res.perNode[p.Spec.NodeName]++
			}
		case err := <-failed:
			b.Fatal(err)
		case <-ctx.Done():
			b.Fatalf("%d of %d pods running after %v", len(res.running), total, densityTimeout)
		}
	}
	wg.Wait()
	return res
}

// createRetries bounds the tries of one creation.
const createRetries = 5

// createRetrying creates pod, trying again (at once: the API server's own
// timeout was the wait) when the server timed out or was overloaded; a
// pod that already exists on a retry was created by the try that timed
// out. It returns how many times it tried again.
func createRetrying(ctx context.Context, cs kubernetes.Interface, ns string, pod *v1.Pod) (int, error) {
	for try := 0; ; try++ {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		switch {
		case err == nil:
			return try, nil
		case try > 0 && apierrors.IsAlreadyExists(err):
			return try, nil
		case try+1 < createRetries && (apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err)):
			continue
		default:
			return try, err
		}
	}
}

// densityClusterParent is where the density cluster's directory goes:
// /dev/shm when it is a directory (a tmpfs on Linux), else the temporary
// directory.
func densityClusterParent() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// selfSample is this process's CPU time and memory at one moment.
type selfSample struct {
	cpu       time.Duration // user + system
	heap, rss int64         // live heap after a GC, resident set
}

// sampleSelf collects garbage and samples this process.
func sampleSelf() selfSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s := selfSample{
		cpu:  time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		heap: int64(ms.HeapInuse),
	}
	if f, err := os.Open("/proc/self/status"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				s.rss = kb << 10
			}
		}
	}
	return s
}

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// processCPU returns the CPU time (user + system) process pid has used.
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's name, which is in parentheses and
	// may hold spaces: state is field 3, utime 14, stime 15.
	_, rest, ok := strings.Cut(string(raw), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		b.Fatalf("cannot read /proc/%d/stat: %q", pid, raw)
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * clockTick
}

// childProcess returns the pid of this process's child whose command name
// (as /proc shows it, at most 15 characters) is comm.
func childProcess(b *testing.B, comm string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		name, rest, ok := strings.Cut(string(raw), ") ")
		fields := strings.Fields(rest)
		if ok && len(fields) > 1 && fields[1] == self && strings.HasSuffix(name, "("+comm) {
			return pid
		}
	}
	b.Fatalf("no child process %q", comm)
	return 0
}

// loadAverage returns /proc/loadavg's three load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
