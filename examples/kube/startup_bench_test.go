package kube_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// Pod startup benchmark: 300 pods over 10 podkit nodes, in a whole
// cluster. Kubernetes' pod startup SLO: the 99th percentile of the time
// from a stateless pod's creation to it running, as seen by a watch
// (image pulls excluded), is at most 5 seconds.
const (
	benchPods    = 300
	benchNodes   = 10
	benchCreator = 10 // pods created at once
	// benchCreateQPS and benchCreateBurst are the creating client's rate
	// limits, set so that they never are what limits the creations
	// (client-go's default, 5 per second, would make "at once" a minute).
	benchCreateQPS   = 1000
	benchCreateBurst = 2000
)

// startupOwnStagesFlag, -startup.ownstages, makes BenchmarkPodStartup's
// agents run their pods' sandbox stages and log shims from their own
// executables (the test binary, the podkit-agent command) rather than from
// processruntime's cmd/podkit-stages, which clustertest builds
// (clustertest.Options.OwnStageExecutable; the podkit-agent's
// --stage-executable).
var startupOwnStagesFlag = flag.Bool("startup.ownstages", false, "BenchmarkPodStartup: the agents run the sandbox stages from their own executables, not from cmd/podkit-stages")

// startupSandboxFlag, -startup.sandbox, is BenchmarkPodStartup's agents'
// sandbox setting (agent.Config.Sandbox, the podkit-agent's --sandbox):
// auto, the default (every pod in a sandbox of its own where the machine
// allows it), or off (the pods run as plain processes), to give the
// sandbox's part of the startup time.
var startupSandboxFlag = flag.String("startup.sandbox", "auto", "BenchmarkPodStartup: the agents' --sandbox, auto or off")

// startupNetworkFlag, -startup.podnetwork=false, puts BenchmarkPodStartup's
// sandboxed pods on no pod network (a loopback only: no bridge, veth nor
// address; the podkit-agent's --pod-cidr none), to give the pod network's
// part of the startup time.
var startupNetworkFlag = flag.Bool("startup.podnetwork", true, "BenchmarkPodStartup: the sandboxed pods get the node's pod network (false: a loopback only)")

// startupTokenFlag, -startup.token=false, creates BenchmarkPodStartup's
// pods with automountServiceAccountToken false: no projected service
// account volume, whose token is an API request (TokenRequest) at each
// pod's first sync, to give that volume's part of the startup time.
var startupTokenFlag = flag.Bool("startup.token", true, "BenchmarkPodStartup: the pods mount their service account token (false: automountServiceAccountToken false)")

// BenchmarkPodStartup creates benchPods pods (no node named: the scheduler
// places them) on a cluster of benchNodes podkit nodes, all at once and
// then 20 per second, at the control plane's default settings, and
// reports each pod's startup latency (creation to Running seen by a
// watch) with the stage where its time went:
//
//   - total: creation to Running seen by the watch (the SLO's figure);
//   - node: bound (spec.nodeName seen by the watch) to Running, the node's
//     part;
//   - create, bind: the Create call, and from its return to the binding;
//   - deliver, syncwait, sync: bound to handed to the agent's pod worker,
//     to its first SyncPod, and that SyncPod;
//   - writeq, write, watch: that SyncPod's return to the Running status
//     patch sent, the patch, and its acceptance to the watch seeing it;
//   - readq, read: where the status writer read the pod before that patch
//     (statuswriter.WriteTrace.Read), writeq split in two: the SyncPod's
//     return to the read sent, and the read sent to the patch sent (only
//     the pods whose Running patch needed a read have them);
//   - patches/pod: the status patches a pod got until it was Running.
//
// Each is a p50 and a p99 (-p50-s, -p99-s) over every pod of every
// iteration; total and node also give the spread of the iterations' own
// p99s (-p99-min-s, -p99-max-s). Every node's agent talks to the API
// server at the kubelet's default rate limits (agent.DefaultClientQPS,
// agent.DefaultClientBurst), its events on a client of their own at the
// same limits, as the kubelet's. Nine nodes are agents in this process, which
// report their stages through agent.Config.Trace; one is the podkit-agent
// command in a process of its own, whose pods count in total and node
// only, and whose resident memory once every pod runs (and its peak) is
// reported too. Each iteration uses a fresh namespace, deleted (untimed)
// after. Several iterations (-benchtime 3x) give the spread:
//
//	go test -run '^$' -bench PodStartup -benchtime 3x ./
//	go test -run '^$' -bench PodStartup -benchtime 3x ./ -args -startup.sandbox off
//	go test -run '^$' -bench PodStartup -benchtime 3x ./ -args -startup.podnetwork=false -startup.token=false
func BenchmarkPodStartup(b *testing.B) {
	dir := b.TempDir()
	logs, err := os.Create(filepath.Join(dir, "cluster.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logs.Close()
	ctx := context.Background()
	trace := newStartupTrace()
	var sandbox processruntime.SandboxMode
	switch *startupSandboxFlag {
	case "auto":
		sandbox = processruntime.SandboxAuto
	case "off":
		sandbox = processruntime.SandboxOff
	default:
		b.Fatalf("-startup.sandbox %q: want auto or off", *startupSandboxFlag)
	}
	c, err := clustertest.Start(ctx, clustertest.Options{
		Nodes:              clustertest.Nodes(benchNodes - 1),
		ControlPlaneLog:    logs,
		NewAgent:           tracedAgent(trace, sandbox, *startupNetworkFlag),
		OwnStageExecutable: *startupOwnStagesFlag,
	})
	if err != nil {
		b.Fatal(err)
	}
	agentFlags := []string{"--sandbox", *startupSandboxFlag}
	if !*startupNetworkFlag {
		agentFlags = append(agentFlags, "--pod-cidr", "none")
	}
	b.Logf("sandbox %s, pod network %v, service account token %v, stages from %q (empty: the agents' own executables)",
		*startupSandboxFlag, *startupNetworkFlag, *startupTokenFlag, c.StageExecutable())
	defer func() {
		if err := c.Close(); err != nil {
			b.Error(err)
		}
	}()
	agentPID, stopAgent := startAgentProcess(b, c, fmt.Sprintf("node-%d", benchNodes-1), dir, agentFlags...)
	defer stopAgent()

	admin := c.Admin()
	creatorCfg := c.AdminConfig()
	creatorCfg.QPS, creatorCfg.Burst = benchCreateQPS, benchCreateBurst
	creator, err := kubernetes.NewForConfig(creatorCfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, rate := range []int{0, 20} {
		name := "all-at-once"
		if rate > 0 {
			name = fmt.Sprintf("%d-per-second", rate)
		}
		b.Run(name, func(b *testing.B) {
			var iterations [][]*podStamps
			for i := range b.N {
				ns := fmt.Sprintf("%s-%d", name, i)
				sum0, count0, _ := nodeStart(ctx, admin, "node-0")
				pods, perNode := startPods(b, creator, trace, ns, rate)
				b.StopTimer()
				iterations = append(iterations, pods)
				rss, hwm := processMemory(b, agentPID)
				b.ReportMetric(float64(rss)/(1<<20), "agent-rss-MiB")
				b.ReportMetric(float64(hwm)/(1<<20), "agent-peak-rss-MiB")
				load, _ := os.ReadFile("/proc/loadavg")
				b.Logf("iteration %d, %d pods (load average %s); pods per node %v; the podkit-agent process: RSS %d MiB (peak %d MiB); stages:%s",
					i, len(pods), strings.TrimSpace(string(load)), perNode, rss>>20, hwm>>20, describeStages(pods))
				if sum, count, ok := nodeStart(ctx, admin, "node-0"); ok && count > count0 {
					mean := (sum - sum0) / float64(count-count0)
					b.ReportMetric(mean, "node0-start-mean-s")
					b.Logf("node-0's own start of its pods (kubelet_pod_start_duration_seconds: first seen to running after a sync): mean %.3fs", mean)
				}
				deleteNamespace(b, admin, ns)
				b.StartTimer()
			}
			reportStages(b, iterations)
		})
	}
}

// tracedAgent is a clustertest NewAgent: the default agent, with a client
// at the kubelet's default rate limits, its stages reported to trace, and
// sandbox as its agent.Config.Sandbox, on the node's pod network unless
// network is false.
func tracedAgent(trace *startupTrace, sandbox processruntime.SandboxMode, network bool) func(clustertest.NodeEnv) (clustertest.Agent, error) {
	return func(env clustertest.NodeEnv) (clustertest.Agent, error) {
		cfg := rest.CopyConfig(env.Config)
		cfg.QPS, cfg.Burst = agent.DefaultClientQPS, agent.DefaultClientBurst
		client, err := agent.NewClient(cfg)
		if err != nil {
			return nil, err
		}
		events, err := agent.NewClient(cfg) // a budget of its own, as the kubelet's events have
		if err != nil {
			return nil, err
		}
		ac := clustertest.DefaultAgentConfig(env)
		ac.Client, ac.EventClient = client, events
		ac.Trace = trace.record
		ac.Sandbox = sandbox
		ac.PodCIDRFromNode = network
		return agent.New(ac)
	}
}

// deleteNamespace deletes ns and waits until it is gone, pods included.
func deleteNamespace(b *testing.B, cs kubernetes.Interface, ns string) {
	ctx := context.Background()
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		b.Fatalf("namespace %s not deleted: %v", ns, err)
	}
}

// startPods creates benchPods pods in the new namespace ns, rate per
// second (0: as fast as benchCreator clients can), waits until a watch
// saw each Running, and returns each pod's stamps (the agents' from trace)
// and how many pods each node runs.
func startPods(b *testing.B, cs kubernetes.Interface, trace *startupTrace, ns string, rate int) ([]*podStamps, map[string]int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	// A watch the API server ends (it does, when loaded) is resumed where
	// it stopped.
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
	trace.take() // what the previous namespace's deletion left

	names := make(chan string)
	var wg sync.WaitGroup
	for range benchCreator {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: scriptSpec("exec sleep 3600")}
				if !*startupTokenFlag {
					pod.Spec.AutomountServiceAccountToken = new(false)
				}
				start := time.Now()
				created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				if err != nil {
					b.Error(err)
					return
				}
				end := time.Now()
				trace.update(created.UID, func(s *podStamps) { s.createStart, s.createEnd = start, end })
			}
		}()
	}
	go func() {
		var tick <-chan time.Time
		if rate > 0 {
			t := time.NewTicker(time.Second / time.Duration(rate))
			defer t.Stop()
			tick = t.C
		}
		for i := range benchPods {
			if tick != nil {
				<-tick
			}
			names <- fmt.Sprintf("p-%03d", i)
		}
		close(names)
	}()

	running := make(map[types.UID]bool, benchPods)
	bound := make(map[types.UID]bool, benchPods)
	node := make(map[types.UID]string, benchPods)
	perNode := map[string]int{}
	for len(running) < benchPods {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("the watch ended with %d of %d pods running", len(running), benchPods)
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			if !bound[p.UID] && p.Spec.NodeName != "" {
				bound[p.UID] = true
				node[p.UID] = p.Spec.NodeName
				trace.update(p.UID, func(s *podStamps) { s.bound = now })
			}
			if p.Status.Phase != v1.PodRunning || running[p.UID] {
				continue
			}
			running[p.UID] = true
			perNode[p.Spec.NodeName]++
			trace.update(p.UID, func(s *podStamps) { s.running = now })
		case <-ctx.Done():
			b.Fatalf("%d of %d pods running after 5 minutes", len(running), benchPods)
		}
	}
	wg.Wait()
	stamps := trace.take()
	pods := make([]*podStamps, 0, benchPods)
	type slow struct {
		uid   types.UID
		stamp *podStamps
	}
	var slowest []slow
	for uid := range running {
		s := stamps[uid]
		if s == nil || s.createStart.IsZero() {
			b.Fatalf("pod %s ran without a creation stamp", uid)
		}
		pods = append(pods, s)
		slowest = append(slowest, slow{uid, s})
	}
	slices.SortFunc(slowest, func(a, b slow) int {
		return int(b.stamp.running.Sub(b.stamp.createStart) - a.stamp.running.Sub(a.stamp.createStart))
	})
	for _, s := range slowest[:5] {
		b.Logf("slowest: on %s, running after %v, bound after %v", node[s.uid],
			s.stamp.running.Sub(s.stamp.createStart).Round(time.Millisecond), s.stamp.bound.Sub(s.stamp.createStart).Round(time.Millisecond))
	}
	return pods, perNode
}

// startAgentProcess builds cmd/podkit-agent and runs it as node name, with
// a kubeconfig of that node's identity, the cluster's kubelet API
// settings and stages program (--stage-executable, the cluster's
// StageExecutable, unless that is "") and the flags extra, which win,
// until the returned stop is called; it returns once the node is Ready and
// schedulable.
func startAgentProcess(b *testing.B, c *clustertest.Cluster, name, dir string, extra ...string) (int, func()) {
	bin := buildOnce(b, "github.com/podkit/podkit/examples/kube/cmd/podkit-agent")
	cfg, err := c.NodeConfig(name)
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "agent.kubeconfig")
	if err := clustertest.WriteKubeconfig(kubeconfig, cfg); err != nil {
		b.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, c.AdminConfig().CAData, 0o600); err != nil {
		b.Fatal(err)
	}
	stateDir := filepath.Join(dir, "agent-state")
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--node-name", name, "--state-dir", stateDir,
		"--heartbeat-interval", "1s", "--housekeeping-interval", "1s",
		"--client-ca-file", caFile, "--kubelet-port", "0")
	if stages := c.StageExecutable(); stages != "" {
		cmd.Args = append(cmd.Args, "--stage-executable", stages)
	}
	cmd.Args = append(cmd.Args, extra...)
	stopAgent := runAgentCommand(b, cmd, dir)
	stop := func() {
		stopAgent()
		// The agent leaves its pods' processes running, by design: stop
		// them as the cluster does for its own nodes.
		if err := clustertest.StopPodProcesses(stateDir); err != nil {
			b.Error(err)
		}
		// And its pod network (bridge, veths, network namespaces).
		if err := processruntime.RemoveNetwork(context.Background(), stateDir); err != nil {
			b.Error(err)
		}
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.Admin().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && nodeReady(n) && !hasTaint(n, v1.TaintNodeNotReady, v1.TaintEffectNoSchedule), nil
	})
	if err != nil {
		stop()
		b.Fatalf("the podkit-agent node did not become Ready: %v", err)
	}
	return cmd.Process.Pid, stop
}

// runAgentCommand starts cmd, a podkit-agent, with its output in
// dir/agent.log, and returns a function that stops it (runCommand; an
// exit status other than 0 is a benchmark error).
func runAgentCommand(b *testing.B, cmd *exec.Cmd, dir string) (stop func()) {
	return runCommand(b, cmd, "podkit-agent", filepath.Join(dir, "agent.log"), true)
}

// runCommand starts cmd, the benchmark's process name, with its output
// in the file logPath, and returns a function that stops it: SIGTERM,
// then SIGKILL after a minute (a benchmark error), and closes the log.
// With checkExit, an exit status other than 0 is a benchmark error too.
func runCommand(b *testing.B, cmd *exec.Cmd, name, logPath string, checkExit bool) (stop func()) {
	logs, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil && checkExit {
				b.Errorf("%s: %v", name, err)
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			b.Errorf("%s did not stop on SIGTERM", name)
		}
		logs.Close()
	}
}

// processMemory returns the resident set size of process pid, and its
// peak, in bytes.
func processMemory(b *testing.B, pid int) (rss, peak int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		key, value, _ := strings.Cut(s.Text(), ":")
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, _ := strconv.ParseInt(fields[0], 10, 64)
		switch key {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return rss, peak
}

// nodeStart returns the sum and count of a node's
// kubelet_pod_start_duration_seconds, read through the API server's node
// proxy: how long the node took from seeing each pod to running it,
// without the status's way back to the API server. ok is false when it
// cannot be read (the node proxy refuses loopback addresses).
func nodeStart(ctx context.Context, cs kubernetes.Interface, node string) (sum float64, count uint64, ok bool) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/metrics").DoRaw(ctx)
	if err != nil {
		return 0, 0, false
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		return 0, 0, false
	}
	f, found := fams["kubelet_pod_start_duration_seconds"]
	if !found || len(f.GetMetric()) != 1 {
		return 0, 0, true // nothing observed yet
	}
	h := f.GetMetric()[0].GetHistogram()
	return h.GetSampleSum(), h.GetSampleCount(), true
}
