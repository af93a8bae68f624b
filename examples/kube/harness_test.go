package kube_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/textlogger"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/examples/kube/nodestatus"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// The scenarios of TestCluster run on one cluster of package clustertest
// (etcd, kube-apiserver, kube-scheduler, kube-controller-manager in this
// process), as parallel subtests. Each adds a pool of nodes of its own,
// labelled and tainted with its name, and runs its workloads in a
// namespace of its own with a node selector and a toleration for the
// pool: no scenario's workload lands on another's nodes, so a scenario may
// stop, drain or restart its nodes without touching the others.

// clusterTimeout bounds each wait of the cluster scenarios: a node failure
// takes NodeMonitorGracePeriod plus the eviction seconds, more under -race
// on a loaded machine.
const clusterTimeout = 2 * time.Minute

// poolLabel labels (and taints) the nodes of a scenario's pool.
const poolLabel = "test.podkit.io/pool"

// harness is the cluster the scenarios share.
type harness struct {
	c       *clustertest.Cluster
	kubectl *kubectl
	// logPath holds the control plane's and the agents' logs.
	logPath string
}

// startHarness starts a cluster with no node for the rest of t, and
// checks at the end that it stopped every pod process and left no
// directory behind. The control plane's and the agents' logs go to a file
// whose tail is printed when t failed.
//
// With PODKIT_CLUSTER_LOG set, the logs go to that file instead, which is
// kept.
func startHarness(t *testing.T) *harness {
	logPath := os.Getenv("PODKIT_CLUSTER_LOG")
	if logPath == "" {
		logPath = filepath.Join(t.TempDir(), "cluster.log")
	}
	logs, err := os.Create(logPath)
	require.NoError(t, err)
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(2), textlogger.Output(logs)))
	metricsServer := buildMetricsServer(t, logs)
	start := time.Now()
	c, err := clustertest.Start(testContextFor(t, clusterTimeout), clustertest.Options{
		Logger:          logger,
		ControlPlaneLog: logs,
		NewAgent:        harnessAgent,
		// For kubectl top (testKubectlTop).
		MetricsServer:       true,
		MetricsServerBinary: metricsServer,
	})
	require.NoError(t, err)
	t.Logf("control plane ready in %v", time.Since(start).Round(time.Millisecond))
	h := &harness{c: c, logPath: logPath}
	t.Cleanup(func() {
		uids := h.allPodUIDs(t)
		require.NoError(t, c.Close(), "closing the cluster")
		_, err := os.Stat(c.Dir())
		require.True(t, errors.Is(err, os.ErrNotExist), "the cluster's directory is removed: %v", err)
		procs, err := processruntime.ScanProcesses(func(uid string) bool { return uids[types.UID(uid)] })
		require.NoError(t, err)
		require.Empty(t, procs, "no pod process outlives the cluster")
		if t.Failed() {
			printTail(t, logPath, 300)
		}
		logs.Close()
	})
	h.kubectl = buildKubectl(t, c.Kubeconfig())
	return h
}

// allPodUIDs returns the UIDs of every pod the API server has.
func (h *harness) allPodUIDs(t *testing.T) map[types.UID]bool {
	pods, err := h.c.Admin().CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	uids := map[types.UID]bool{}
	for _, p := range pods.Items {
		uids[p.UID] = true
	}
	return uids
}

// printTail logs the last n lines of the file at path.
func printTail(t *testing.T, path string, n int) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var tail []string
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		tail = append(tail, s.Text())
		if len(tail) > n {
			tail = tail[1:]
		}
	}
	t.Logf("last %d lines of the cluster's log:\n%s", len(tail), strings.Join(tail, "\n"))
}

// pool adds n nodes named <name>-0... to the cluster, labelled and tainted
// (NoSchedule) with poolLabel=<name>, and returns them once each is Ready
// and schedulable.
func (h *harness) pool(t *testing.T, name string, n int) []*clustertest.Node {
	t.Helper()
	return h.addPool(t, name, n, nil)
}

// sandboxedPool is pool, said where a scenario needs its pods in
// sandboxes (exec through the sandbox's init, say): the harness's nodes
// run them there unless they are a hostFilesPool's.
func (h *harness) sandboxedPool(t *testing.T, name string, n int) []*clustertest.Node {
	t.Helper()
	return h.pool(t, name, n)
}

// addPool is pool, with labels added to the nodes'.
func (h *harness) addPool(t *testing.T, name string, n int, labels map[string]string) []*clustertest.Node {
	t.Helper()
	nodes := make([]*clustertest.Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = h.c.AddNode(testContextFor(t, clusterTimeout), clustertest.NodeOptions{
				Name:   fmt.Sprintf("%s-%d", name, i),
				Labels: mergeLabels(labels, poolLabel, name),
				Taints: []v1.Taint{{Key: poolLabel, Value: name, Effect: v1.TaintEffectNoSchedule}},
			})
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return nodes
}

// namespace creates the namespace name and waits for its default service
// account, without which no pod can be created in it.
func (h *harness) namespace(t *testing.T, name string) string {
	t.Helper()
	ctx := testContextFor(t, clusterTimeout)
	_, err := h.c.Admin().CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := h.c.Admin().CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "waiting for the default service account of namespace %s", name)
	return name
}

// inPool makes spec's pods run on the pool's nodes, and only there.
func inPool(spec v1.PodSpec, pool string) v1.PodSpec {
	spec.NodeSelector = map[string]string{poolLabel: pool}
	spec.Tolerations = append(spec.Tolerations, v1.Toleration{Key: poolLabel, Operator: v1.TolerationOpEqual, Value: pool, Effect: v1.TaintEffectNoSchedule})
	return spec
}

// scriptSpec is a pod spec of one container "main" running script with sh,
// with POD_NAME set to the pod's name.
func scriptSpec(script string) v1.PodSpec {
	return v1.PodSpec{
		Containers: []v1.Container{{
			Name:    "main",
			Image:   "none",
			Command: []string{"/bin/sh", "-c", script},
			Env: []v1.EnvVar{{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{
				FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"},
			}}},
		}},
	}
}

// clusterNodeIP is the address the harness's nodes serve the kubelet API
// on (clustertest's default).
func clusterNodeIP() net.IP { return nodestatus.HostIP() }

// testContextFor returns a context that ends when t ends or after d.
func testContextFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitPods polls the pods of namespace matching selector until cond holds
// for them, and returns them.
func waitPods(t *testing.T, cs kubernetes.Interface, namespace, selector, what string, cond func([]v1.Pod) bool) []v1.Pod {
	t.Helper()
	var last []v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, clusterTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil // retried until the deadline
		}
		last = list.Items
		return cond(last), nil
	})
	require.NoError(t, err, "waiting for pods %s in %s: %s; last seen:\n%s", selector, namespace, what, summarize(last))
	return last
}

// waitNode polls the Node name until cond holds, and returns it.
func waitNode(t *testing.T, cs kubernetes.Interface, name, what string, cond func(*v1.Node) bool) *v1.Node {
	t.Helper()
	var last *v1.Node
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, clusterTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		return cond(n), nil
	})
	require.NoError(t, err, "waiting for node %s: %s; last seen: %+v", name, what, last)
	return last
}

// waitGone waits until the pods of uids are gone from the API server and
// no process of theirs runs.
func waitGone(t *testing.T, cs kubernetes.Interface, namespace string, uids ...types.UID) {
	t.Helper()
	want := map[types.UID]bool{}
	for _, u := range uids {
		want[u] = true
	}
	var still []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, clusterTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, nil
		}
		still = still[:0]
		if list != nil {
			for _, p := range list.Items {
				if want[p.UID] {
					still = append(still, p.Name+" in the API")
				}
			}
		}
		procs, err := processruntime.ScanProcesses(func(uid string) bool { return want[types.UID(uid)] })
		if err != nil {
			return false, err
		}
		for _, p := range procs {
			still = append(still, fmt.Sprintf("PID %d of %s", p.PID, p.PodUID))
		}
		return len(still) == 0, nil
	})
	require.NoError(t, err, "waiting for pods to be gone with their processes; still there: %v", still)
}

// live returns the pods that are not being deleted.
func live(pods []v1.Pod) []v1.Pod {
	return slices.DeleteFunc(slices.Clone(pods), func(p v1.Pod) bool { return p.DeletionTimestamp != nil })
}

// allRunning says whether there are n live pods, all Running, with a
// process each.
func allRunning(n int) func([]v1.Pod) bool {
	return func(pods []v1.Pod) bool {
		pods = live(pods)
		if len(pods) != n {
			return false
		}
		for _, p := range pods {
			if p.Status.Phase != v1.PodRunning {
				return false
			}
		}
		return true
	}
}

// nodesOf returns the nodes the pods are bound to, each once, sorted.
func nodesOf(pods []v1.Pod) []string {
	var nodes []string
	for _, p := range pods {
		if !slices.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	slices.Sort(nodes)
	return nodes
}

// names returns the nodes' names, sorted.
func names(nodes []*clustertest.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name()
	}
	slices.Sort(out)
	return out
}

// uidsOfPods returns the pods' UIDs.
func uidsOfPods(pods []v1.Pod) []types.UID {
	out := make([]types.UID, len(pods))
	for i, p := range pods {
		out[i] = p.UID
	}
	return out
}

// summarize describes pods for failure messages.
func summarize(pods []v1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "  %s uid=%s node=%s phase=%s deleting=%v\n", p.Name, p.UID, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
	}
	return b.String()
}

// requireProcesses fails t unless every pod has a running process.
func requireProcesses(t *testing.T, pods []v1.Pod) {
	t.Helper()
	for _, p := range pods {
		require.NotEmpty(t, mainProcesses(t, p.UID), "pod %s runs a process", p.Name)
	}
}

// hostFilesLabel marks the nodes of a pool whose pods share host
// directories with their test (files they wait for and write, under /tmp,
// which a sandboxed pod has of its own): harnessAgent runs their pods
// outside a sandbox.
const hostFilesLabel = "test.podkit.io/host-files"

// harnessAgent is clustertest.DefaultAgent: pods sandboxed where the
// machine allows it, on the node's pod network; but for the nodes of a
// hostFilesPool, whose pods run outside a sandbox.
func harnessAgent(env clustertest.NodeEnv) (clustertest.Agent, error) {
	cfg := clustertest.DefaultAgentConfig(env)
	if env.Node.Labels[hostFilesLabel] == "true" {
		cfg.Sandbox = processruntime.SandboxOff
	}
	if env.Node.Labels[fastVolumesLabel] == "true" {
		cfg.VolumeRefreshInterval = fastVolumeRefresh
	}
	return agent.New(cfg)
}

// fastVolumesLabel marks the nodes of a fastVolumesPool.
const fastVolumesLabel = "test.podkit.io/fast-volumes"

// fastVolumeRefresh is the VolumeRefreshInterval of a fastVolumesPool's
// nodes, instead of the default minute.
const fastVolumeRefresh = time.Second

// fastVolumesPool is sandboxedPool with nodes whose volumes are refreshed
// and measured every fastVolumeRefresh.
func (h *harness) fastVolumesPool(t *testing.T, name string, n int) []*clustertest.Node {
	t.Helper()
	return h.addPool(t, name, n, map[string]string{fastVolumesLabel: "true"})
}

// hostFilesPool is pool with nodes whose pods run outside a sandbox and
// share the host's /tmp with the test.
func (h *harness) hostFilesPool(t *testing.T, name string, n int) []*clustertest.Node {
	t.Helper()
	return h.addPool(t, name, n, map[string]string{hostFilesLabel: "true"})
}

// mergeLabels returns labels with key=value added.
func mergeLabels(labels map[string]string, key, value string) map[string]string {
	out := map[string]string{key: value}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// requireBusybox skips a scenario whose containers run busybox's applets
// (httpd, nc) where busybox is not installed: the nodes run their own
// programs for the busybox image, and a container that runs busybox then
// exits 127 at once. .ci/run installs busybox-static.
func requireBusybox(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("busybox"); err != nil {
		t.Skip("busybox is not installed on this machine (.ci/run installs busybox-static): this scenario's containers run its httpd and nc")
	}
}
