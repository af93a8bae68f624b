package kube_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/clustertest"
)

// The kwok side of BenchmarkDensity (-density.runtime=kwok): kwok's
// controller (sigs.k8s.io/kwok/cmd/kwok), one process for every node, is
// what the scalability people use when they want nodes at the least cost
// and accept that no kubelet runs. It is built at benchmark time from the
// Go module proxy, outside this module (go install <pkg>@<version>, so
// that kwok's own go.mod picks its dependencies and nothing of them enters
// examples/kube's), and the benchmark skips when it cannot be built.
var densityKwokVersion = flag.String("density.kwok-version", "v0.8.0", "BenchmarkDensity: the kwok version -density.runtime=kwok builds")

// kwokModule is kwok's module, kwokPackage its controller's command.
const (
	kwokModule  = "sigs.k8s.io/kwok"
	kwokPackage = kwokModule + "/cmd/kwok"
	// kwokNodeAnnotation marks the Nodes kwok manages (its
	// --manage-nodes-with-annotation-selector), as kwokctl's own do.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	// kwokLeaseSeconds is the Lease kwok keeps for each node: renewed
	// every quarter of it, 10 s, podkit's densityHeartbeat.
	kwokLeaseSeconds = 40
)

// kwokStageFiles are kwok's default stages, as kwokctl configures them
// for a cluster with node Leases: the node's initialization and
// heartbeat, the pod's start, completion and deletion. Paths in kwok's
// module.
var kwokStageFiles = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// kwokBuild is a kwok controller built for the benchmark.
type kwokBuild struct {
	binary string // the kwok command
	stages string // a configuration file with kwokStageFiles
}

// errKwokBuild wraps every reason buildKwok cannot give a kwok.
var errKwokBuild = errors.New("kwok cannot be built")

// buildKwok builds kwok's controller at version (of module kwokModule)
// into dir with the go command goCmd, and writes its stages file there.
// It runs "go install <pkg>@<version>" from dir with GOWORK=off and GOBIN
// set: outside any module, so that kwok's go.mod chooses the dependencies.
// Any failure is an error wrapping errKwokBuild, with the go command's
// output.
func buildKwok(ctx context.Context, goCmd, version, dir string) (kwokBuild, error) {
	if !strings.HasPrefix(version, "v") || strings.ContainsAny(version, "@ \t\n/") {
		return kwokBuild{}, fmt.Errorf("%w: version %q is not a module version (want v0.8.0 or the like)", errKwokBuild, version)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return kwokBuild{}, fmt.Errorf("%w: %v", errKwokBuild, err)
	}
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o700); err != nil {
		return kwokBuild{}, fmt.Errorf("%w: %v", errKwokBuild, err)
	}
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, goCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOBIN="+binDir, "GOFLAGS=-buildvcs=false")
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%w: %s %s: %v\n%s", errKwokBuild, goCmd, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
		}
		return []byte(out.String()), nil
	}
	if _, err := run("install", kwokPackage+"@"+version); err != nil {
		return kwokBuild{}, err
	}
	raw, err := run("mod", "download", "-json", kwokModule+"@"+version)
	if err != nil {
		return kwokBuild{}, err
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(raw, &mod); err != nil || mod.Dir == "" {
		return kwokBuild{}, fmt.Errorf("%w: no module directory in go mod download's answer %q", errKwokBuild, raw)
	}
	var stages []string
	for _, f := range kwokStageFiles {
		b, err := os.ReadFile(filepath.Join(mod.Dir, filepath.FromSlash(f)))
		if err != nil {
			return kwokBuild{}, fmt.Errorf("%w: kwok %s's default stages: %v", errKwokBuild, version, err)
		}
		stages = append(stages, strings.TrimSpace(string(b)))
	}
	stagesFile := filepath.Join(dir, "stages.yaml")
	if err := os.WriteFile(stagesFile, []byte(strings.Join(stages, "\n---\n")+"\n"), 0o600); err != nil {
		return kwokBuild{}, fmt.Errorf("%w: %v", errKwokBuild, err)
	}
	return kwokBuild{binary: filepath.Join(binDir, "kwok"), stages: stagesFile}, nil
}

// startKwok starts kwok's controller against c, managing the Nodes with
// kwokNodeAnnotation, its output in dir/kwok.log. It returns the
// process's pid and a func that stops it.
func startKwok(b *testing.B, k kwokBuild, c *clustertest.Cluster, dir string) (int, func()) {
	cmd := exec.Command(k.binary,
		"--kubeconfig", c.Kubeconfig(),
		"--config", k.stages,
		"--manage-nodes-with-annotation-selector", kwokNodeAnnotation+"=fake",
		"--node-lease-duration-seconds", fmt.Sprint(kwokLeaseSeconds),
		// The nodes' InternalIP, which kwok gives pods as their host IP:
		// the address clustertest's own nodes have (kwokctl gives its
		// node's).
		"--node-ip", clusterNodeIP().String(),
	)
	// kwok also reads ~/.kwok/kwok.yaml when there is one: not here.
	cmd.Env = append(os.Environ(), "HOME="+dir)
	// kwok's exit status on SIGTERM says nothing.
	stop := runCommand(b, cmd, "kwok", filepath.Join(dir, "kwok.log"), false)
	return cmd.Process.Pid, stop
}

// kwokNode is the Node the benchmark creates for kwok to manage: the
// podkit agent's Node object (the same capacity, 110 pods), with kwok's
// annotation.
func kwokNode(name string) *v1.Node {
	n := agent.NodeObject(name)
	n.Annotations = map[string]string{kwokNodeAnnotation: "fake"}
	return n
}

// createKwokNodes creates the Nodes and waits until every one is Ready and
// without the not-ready taint (the node lifecycle controller removes it).
func createKwokNodes(ctx context.Context, b *testing.B, cs kubernetes.Interface, names []string) {
	for _, name := range names {
		if _, err := cs.CoreV1().Nodes().Create(ctx, kwokNode(name), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range list.Items {
			if nodeSchedulable(&list.Items[i]) {
				ready++
			}
		}
		last = fmt.Sprintf("%d of %d nodes Ready and schedulable", ready, len(names))
		return ready == len(names), nil
	})
	if err != nil {
		b.Fatalf("kwok's nodes: %s: %v", last, err)
	}
}

// nodeSchedulable reports whether n is Ready and has no not-ready or
// unreachable taint.
func nodeSchedulable(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1.TaintNodeNotReady || t.Key == v1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// runDensityKwok is one iteration of BenchmarkDensity on kwok's nodes:
// the same cluster, node-lifecycle timings, pods and rate as runDensity,
// with every node kwok's.
func runDensityKwok(b *testing.B, iteration int, k kwokBuild, nodes, perNode, rate int) {
	b.StopTimer()
	ctx := context.Background()
	dir := b.TempDir()
	c := startDensityCluster(ctx, b, dir, nil)
	defer func() {
		if err := c.Close(); err != nil {
			b.Error(err)
		}
	}()
	controlPlane := childProcess(b, "podkit-controlp")
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("kwok-%d", i)
	}

	reqBefore := apiRequests(ctx, b, c.Admin())
	before := sampleSelf()
	cpBefore := processCPU(b, controlPlane)
	b.StartTimer()
	start := time.Now()
	kwokPID, stopKwok := startKwok(b, k, c, dir)
	defer stopKwok()
	createKwokNodes(ctx, b, c.Admin(), names)
	ready := time.Since(start)
	b.Logf("%d kwok nodes Ready and schedulable in %v", nodes, ready.Round(time.Millisecond))

	admin := creatorClient(b, c, rate)
	res := createDensityPods(b, admin, "density", nodes*perNode, rate)
	b.StopTimer()
	running := sampleSelf()
	cpRunning := processCPU(b, controlPlane)
	kwokRSS, kwokPeak := processMemory(b, kwokPID)
	kwokCPU := processCPU(b, kwokPID)
	reqRunning := apiRequests(ctx, b, c.Admin())

	time.Sleep(*densityIdle) // a measuring window, not a wait for an outcome
	cpIdle := processCPU(b, controlPlane)
	kwokIdle := processCPU(b, kwokPID)
	kwokIdleRSS, _ := processMemory(b, kwokPID)
	fid := densityFidelity(ctx, b, c.Admin(), "density")

	n := float64(nodes)
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	res.report(b, nodes, ready)
	b.ReportMetric(kwokCPU.Seconds(), "kwok-cpu-s")
	b.ReportMetric(kwokCPU.Seconds()/n, "cpu-s/node")
	b.ReportMetric(float64((kwokIdle-kwokCPU).Milliseconds())/n/densityIdle.Seconds(), "idle-cpu-ms/s/node")
	b.ReportMetric(mib(kwokRSS), "kwok-rss-MiB")
	b.ReportMetric(mib(kwokRSS)/n, "rss-MiB/node")
	b.ReportMetric((cpRunning - cpBefore).Seconds(), "cp-cpu-s")
	reqs, reqTop := requestDelta(reqBefore, reqRunning)
	b.ReportMetric(reqs, "api-requests")

	b.Logf("iteration %d: kwok %s, one process for %d nodes", iteration, *densityKwokVersion, nodes)
	b.Logf("iteration %d: %s", iteration, res.summary(nodes, rate))
	b.Logf("iteration %d: the kwok process: CPU %.1fs from its start to every pod Running, %.1f ms/s idle over %v; RSS %d MiB (peak %d MiB), %d MiB idle",
		iteration, kwokCPU.Seconds(), float64((kwokIdle-kwokCPU).Milliseconds())/densityIdle.Seconds(), *densityIdle, kwokRSS>>20, kwokPeak>>20, kwokIdleRSS>>20)
	b.Logf("iteration %d: this process (the benchmark's client and watch): CPU %.1fs; the control plane: CPU %.1fs until every pod ran, %.0f ms/s idle",
		iteration, (running.cpu - before.cpu).Seconds(), (cpRunning - cpBefore).Seconds(), float64((cpIdle-cpRunning).Milliseconds())/densityIdle.Seconds())
	b.Logf("iteration %d: the API server's requests (every client's) from kwok's start to every pod Running: %.0f; %s", iteration, reqs, reqTop)
	b.Logf("iteration %d: %s", iteration, fid)
	b.Logf("iteration %d: load average %s", iteration, loadAverage())
}

// fidelity is what the pods' status and the node-side events show of
// the nodes' work, once every pod runs.
type fidelity struct {
	pods, podIP, hostIP, ready, containerRunning int
	// nodeEvents counts the namespace's events not from the scheduler:
	// the node's (Pulled, Created, Started and the like).
	nodeEvents int
	// deleted is how long one pod took, from a delete with its default
	// grace period (30 s) to gone.
	deleted time.Duration
}

func (f fidelity) String() string {
	return fmt.Sprintf("of %d pods: %d with a pod IP, %d with a host IP, %d Ready, %d with their container running; %d events from the nodes; one pod deleted (default grace) gone in %.3fs",
		f.pods, f.podIP, f.hostIP, f.ready, f.containerRunning, f.nodeEvents, f.deleted.Seconds())
}

// densityFidelity reads what the nodes wrote of ns's pods, then deletes
// one pod and times it until it is gone.
func densityFidelity(ctx context.Context, b *testing.B, cs kubernetes.Interface, ns string) fidelity {
	var f fidelity
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range list.Items {
		f.pods++
		if p.Status.PodIP != "" {
			f.podIP++
		}
		if p.Status.HostIP != "" {
			f.hostIP++
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				f.ready++
			}
		}
		if len(p.Status.ContainerStatuses) == len(p.Spec.Containers) {
			up := true
			for _, c := range p.Status.ContainerStatuses {
				up = up && c.State.Running != nil
			}
			if up {
				f.containerRunning++
			}
		}
	}
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Source.Component != "default-scheduler" && e.ReportingController != "default-scheduler" {
			f.nodeEvents++
		}
	}
	if len(list.Items) == 0 {
		return f
	}
	victim := list.Items[0].Name
	start := time.Now()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(dctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, victim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		b.Fatalf("pod %s still there %v after its deletion", victim, time.Since(start))
	}
	f.deleted = time.Since(start)
	return f
}

// apiRequests reads the API server's apiserver_request_total counters
// (every client's: the nodes', the scheduler's, the controller
// manager's, the benchmark's), summed by verb and resource (with its
// subresource), as "verb resource[/subresource]".
func apiRequests(ctx context.Context, b *testing.B, cs kubernetes.Interface) map[string]float64 {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(raw)) {
		labels, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(labels, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		l := map[string]string{}
		for kv := range strings.SplitSeq(labels, ",") {
			k, val, _ := strings.Cut(kv, "=")
			l[k] = strings.Trim(val, `"`)
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		out[key] += v
	}
	return out
}

// requestDelta returns after less before, its total, and its largest
// entries, formatted.
func requestDelta(before, after map[string]float64) (total float64, top string) {
	type entry struct {
		key string
		n   float64
	}
	var es []entry
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			es = append(es, entry{k, d})
			total += d
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(b.n, a.n) })
	var parts []string
	for _, e := range es[:min(len(es), 8)] {
		parts = append(parts, fmt.Sprintf("%s %.0f", e.key, e.n))
	}
	return total, strings.Join(parts, ", ")
}
