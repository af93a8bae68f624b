package kube_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

func hasTaint(n *v1.Node, key string, effect v1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

// onNode returns the pods bound to node.
func onNode(pods []v1.Pod, node string) []v1.Pod {
	return slices.DeleteFunc(slices.Clone(pods), func(p v1.Pod) bool { return p.Spec.NodeName != node })
}

// testNodeFailure: a node goes dark (its heartbeat and its agent stop,
// its pods' processes keep running). The control plane marks it not
// ready, taints it unreachable, evicts its pods and runs replacements on
// the other nodes. When the node comes back, it is Ready and untainted
// again, and its agent stops the stale pods and lets the API server remove
// them.
func testNodeFailure(t *testing.T, h *harness) {
	nodes := h.pool(t, "fail", 3)
	ns := h.namespace(t, "fail")
	admin := h.c.Admin()
	before := runSleepers(t, admin, ns, "svc", "fail", 3)
	dark := nodes[0]
	stale := onNode(before, dark.Name())
	require.NotEmpty(t, stale, "the failing node runs a replica:\n%s", summarize(before))
	requireProcesses(t, stale)

	start := time.Now()
	dark.StopHeartbeat()
	require.NoError(t, dark.StopAgent())
	waitNode(t, admin, dark.Name(), "not ready and tainted unreachable", func(n *v1.Node) bool {
		return !nodeReady(n) && hasTaint(n, v1.TaintNodeUnreachable, v1.TaintEffectNoExecute)
	})
	t.Logf("node not ready and tainted %v after its heartbeat stopped", time.Since(start).Round(time.Millisecond))
	after := waitPods(t, admin, ns, "app=svc", "the stale pods evicted and 3 replicas Running elsewhere", func(pods []v1.Pod) bool {
		for _, p := range pods {
			if slicesContainsUID(stale, p) && p.DeletionTimestamp == nil {
				return false
			}
		}
		running := live(pods)
		return allRunning(3)(running) && len(onNode(running, dark.Name())) == 0
	})
	t.Logf("replacements running %v after the heartbeat stopped", time.Since(start).Round(time.Millisecond))
	requireProcesses(t, live(after))
	requireProcesses(t, stale) // nobody stopped them: the node is dark

	dark.ResumeHeartbeat()
	require.NoError(t, dark.StartAgent())
	waitNode(t, admin, dark.Name(), "Ready and untainted", func(n *v1.Node) bool {
		return nodeReady(n) && !hasTaint(n, v1.TaintNodeUnreachable, v1.TaintEffectNoExecute) &&
			!hasTaint(n, v1.TaintNodeNotReady, v1.TaintEffectNoExecute)
	})
	waitGone(t, admin, ns, uidsOfPods(stale)...)
	final := live(waitPods(t, admin, ns, "app=svc", "3 Running", allRunning(3)))
	assert.ElementsMatch(t, uidsOfPods(live(after)), uidsOfPods(final), "the replacements keep running")
}

// testClusterAgentRestart: an agent killed and started again adopts its running
// pods (same processes, no restart) and finishes the deletion of a pod
// deleted while it was down.
func testClusterAgentRestart(t *testing.T, h *harness) {
	nodes := h.pool(t, "restart", 1)
	node := nodes[0]
	ns := h.namespace(t, "restart")
	admin := h.c.Admin()
	pods := runSleepers(t, admin, ns, "app", "restart", 2)
	keep, doomed := pods[0], pods[1]
	keepProcs := mainProcesses(t, keep.UID)
	require.NotEmpty(t, keepProcs)

	require.NoError(t, node.StopAgent())
	h.kubectl.run(t, "delete", "pod", "-n", ns, doomed.Name, "--wait=false")
	got, err := admin.CoreV1().Pods(ns).Get(testContextFor(t, clusterTimeout), doomed.Name, metav1.GetOptions{})
	require.NoError(t, err, "with no agent, the deleted pod stays (terminating)")
	require.NotNil(t, got.DeletionTimestamp)
	require.NotEmpty(t, mainProcesses(t, doomed.UID), "with no agent, its process runs on")

	require.NoError(t, node.StartAgent())
	waitGone(t, admin, ns, doomed.UID)
	final := live(waitPods(t, admin, ns, "app=app", "2 Running (the kept pod and a replacement)", allRunning(2)))
	require.True(t, slicesContainsUID(final, keep), "the kept pod is still there:\n%s", summarize(final))
	assert.Equal(t, keepProcs, mainProcesses(t, keep.UID), "the kept pod's process was adopted, not restarted")
	for _, p := range final {
		if p.UID == keep.UID {
			require.Len(t, p.Status.ContainerStatuses, 1)
			assert.Zero(t, p.Status.ContainerStatuses[0].RestartCount)
		}
	}
}

// testDrain: kubectl drain cordons a node and evicts its pods through the
// eviction API; they stop there and run on the other node.
func testDrain(t *testing.T, h *harness) {
	nodes := h.pool(t, "drain", 2)
	ns := h.namespace(t, "drain")
	admin := h.c.Admin()
	pods := runSleepers(t, admin, ns, "web", "drain", 4)
	drained := nodes[0].Name()
	evicted := onNode(pods, drained)
	require.NotEmpty(t, evicted, "the node to drain runs replicas:\n%s", summarize(pods))

	out := h.kubectl.run(t, "drain", drained, "--ignore-daemonsets", "--timeout=2m")
	assert.Contains(t, out, "node/"+drained+" drained")
	for _, p := range evicted {
		assert.Contains(t, out, fmt.Sprintf("pod/%s evicted", p.Name))
	}
	node, err := admin.CoreV1().Nodes().Get(testContextFor(t, clusterTimeout), drained, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, node.Spec.Unschedulable, "cordoned")
	waitGone(t, admin, ns, uidsOfPods(evicted)...)
	final := live(waitPods(t, admin, ns, "app=web", "4 Running", allRunning(4)))
	assert.Equal(t, []string{nodes[1].Name()}, nodesOf(final), "every replica runs on the other node")
	requireProcesses(t, final)
}

// namespaceDeletionTimeout bounds testNamespaceDeletion's wait for the
// namespace to be gone.
const namespaceDeletionTimeout = 5 * time.Minute

// testNamespaceDeletion: deleting a namespace completes: its Deployment,
// ReplicaSet and pods are deleted, the pods' processes stopped, and the
// namespace is gone.
func testNamespaceDeletion(t *testing.T, h *harness) {
	h.pool(t, "ns", 2)
	ns := h.namespace(t, "doomed")
	admin := h.c.Admin()
	runSleepers(t, admin, ns, "web", "ns", 3)
	spec := inPool(scriptSpec("exec sleep 3600"), "ns")
	_, err := admin.CoreV1().Pods(ns).Create(testContextFor(t, clusterTimeout),
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lone", Labels: map[string]string{"app": "lone"}}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	pods := live(waitPods(t, admin, ns, "", "4 Running", allRunning(4)))
	requireProcesses(t, pods)

	start := time.Now()
	h.kubectl.run(t, "delete", "namespace", ns, "--wait=false")
	// The namespace controller deletes what the namespace holds, waits for
	// the pods to go and retries with a backoff of its own: on a loaded
	// machine that takes longer than one pod's wait.
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, namespaceDeletionTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "waiting for the namespace to be gone")
	t.Logf("namespace deleted in %v", time.Since(start).Round(time.Millisecond))
	procs, err := processruntime.ScanProcesses(func(uid string) bool {
		for _, p := range pods {
			if string(p.UID) == uid {
				return true
			}
		}
		return false
	})
	require.NoError(t, err)
	assert.Empty(t, procs, "no process of the namespace's pods runs")
}

// runSleepers creates a Deployment of replicas long sleeps in the pool and
// returns its pods once each runs.
func runSleepers(t *testing.T, admin kubernetes.Interface, ns, name, pool string, replicas int) []v1.Pod {
	t.Helper()
	_, err := admin.AppsV1().Deployments(ns).Create(testContextFor(t, clusterTimeout),
		deployment(ns, name, pool, int32(replicas), scriptSpec("exec sleep 3600")), metav1.CreateOptions{})
	require.NoError(t, err)
	return live(waitPods(t, admin, ns, "app="+name, fmt.Sprintf("%d Running", replicas), allRunning(replicas)))
}
