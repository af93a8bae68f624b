package kube_test

import (
	"bufio"
	"context"
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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/kube/clustertest"
)

// Pod startup benchmark: 300 pods over 10 podkit nodes, in a whole
// cluster. Kubernetes' pod startup SLO: the 99th percentile of the time
// from a stateless pod's creation to it running, as seen by a watch
// (image pulls excluded), is at most 5 seconds.
const (
	benchPods    = 300
	benchNodes   = 10
	benchCreator = 10 // pods created at once
)

// BenchmarkPodStartup creates benchPods pods (no node named: the scheduler
// places them) on a cluster of benchNodes podkit nodes and reports the
// pod startup latency (creation to Running seen by a watch): p50, p90,
// p99 and max, in seconds. One node is the podkit-agent command in a
// process of its own; its resident memory once every pod runs (and its
// peak) are reported too. Each iteration uses a fresh namespace, deleted
// (untimed) after.
//
//	go test -run '^$' -bench PodStartup -benchtime 1x ./
func BenchmarkPodStartup(b *testing.B) {
	dir := b.TempDir()
	logs, err := os.Create(filepath.Join(dir, "cluster.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logs.Close()
	ctx := context.Background()
	c, err := clustertest.Start(ctx, clustertest.Options{Nodes: clustertest.Nodes(benchNodes - 1), ControlPlaneLog: logs})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			b.Error(err)
		}
	}()
	agentPID, stopAgent := startAgentProcess(b, c, fmt.Sprintf("node-%d", benchNodes-1), dir)
	defer stopAgent()

	admin := c.Admin()
	for _, rate := range []int{0, 20} {
		name := "all-at-once"
		if rate > 0 {
			name = fmt.Sprintf("%d-per-second", rate)
		}
		b.Run(name, func(b *testing.B) {
			for i := range b.N {
				ns := fmt.Sprintf("%s-%d", name, i)
				sum0, count0, _ := nodeStart(ctx, admin, "node-0")
				lat, perNode := startPods(b, admin, ns, rate)
				b.StopTimer()
				rss, hwm := processMemory(b, agentPID)
				slices.Sort(lat)
				q := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))].Seconds() }
				b.ReportMetric(q(0.50), "p50-s")
				b.ReportMetric(q(0.90), "p90-s")
				b.ReportMetric(q(0.99), "p99-s")
				b.ReportMetric(lat[len(lat)-1].Seconds(), "max-s")
				b.ReportMetric(float64(rss)/(1<<20), "agent-rss-MiB")
				b.ReportMetric(float64(hwm)/(1<<20), "agent-peak-rss-MiB")
				b.Logf("%d pods: p50 %.3fs p90 %.3fs p99 %.3fs max %.3fs; pods per node %v; the podkit-agent process: RSS %d MiB (peak %d MiB)",
					len(lat), q(0.5), q(0.9), q(0.99), lat[len(lat)-1].Seconds(), perNode, rss>>20, hwm>>20)
				if sum, count, ok := nodeStart(ctx, admin, "node-0"); ok && count > count0 {
					mean := (sum - sum0) / float64(count-count0)
					b.ReportMetric(mean, "node0-start-mean-s")
					b.Logf("node-0's own start of its pods (kubelet_pod_start_duration_seconds: first seen to running after a sync): mean %.3fs", mean)
				}
				deleteNamespace(b, admin, ns)
				b.StartTimer()
			}
		})
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
// second (0: as fast as benchCreator clients can), and returns the latency
// of each, from just before its creation to the watch event that first
// shows it Running, and how many pods each node runs.
func startPods(b *testing.B, cs kubernetes.Interface, ns string, rate int) ([]time.Duration, map[string]int) {
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
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()

	var mu sync.Mutex
	created := make(map[string]time.Time, benchPods)
	names := make(chan string)
	var wg sync.WaitGroup
	for range benchCreator {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: scriptSpec("exec sleep 3600")}
				start := time.Now()
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				created[name] = start
				mu.Unlock()
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

	running := make(map[string]time.Time, benchPods)
	bound := make(map[string]time.Time, benchPods)
	node := make(map[string]string, benchPods)
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
			if _, seen := bound[p.Name]; !seen && p.Spec.NodeName != "" {
				bound[p.Name] = time.Now()
				node[p.Name] = p.Spec.NodeName
			}
			if p.Status.Phase != v1.PodRunning {
				continue
			}
			if _, seen := running[p.Name]; !seen {
				running[p.Name] = time.Now()
				perNode[p.Spec.NodeName]++
			}
		case <-ctx.Done():
			b.Fatalf("%d of %d pods running after 5 minutes", len(running), benchPods)
		}
	}
	wg.Wait()
	lat := make([]time.Duration, 0, benchPods)
	type slow struct {
		name             string
		total, scheduled time.Duration
	}
	var slowest []slow
	for name, at := range running {
		lat = append(lat, at.Sub(created[name]))
		slowest = append(slowest, slow{name, at.Sub(created[name]), bound[name].Sub(created[name])})
	}
	slices.SortFunc(slowest, func(a, b slow) int { return int(b.total - a.total) })
	for _, s := range slowest[:5] {
		b.Logf("slowest: %s running after %v, bound to %s after %v", s.name, s.total.Round(time.Millisecond), node[s.name], s.scheduled.Round(time.Millisecond))
	}
	return lat, perNode
}

// startAgentProcess builds cmd/podkit-agent and runs it as node name, with
// a kubeconfig of that node's identity and the cluster's kubelet API
// settings, until the returned stop is called; it returns once the node
// is Ready and schedulable.
func startAgentProcess(b *testing.B, c *clustertest.Cluster, name, dir string) (int, func()) {
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
	logs, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				b.Errorf("podkit-agent: %v", err)
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			b.Error("podkit-agent did not stop on SIGTERM")
		}
		logs.Close()
		// The agent leaves its pods' processes running, by design: stop
		// them as the cluster does for its own nodes.
		if err := clustertest.StopPodProcesses(stateDir); err != nil {
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
