package kube_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// statusResyncBound is well below the agent's status resync (a minute)
// and pod resync (a minute): a status put back sooner was put back because
// the Node came back, not by a periodic check.
const statusResyncBound = 30 * time.Second

// testNodeReregistration: the Node of a running agent is deleted (kubectl
// delete node). The agent notices it from its watch, registers the Node
// again within seconds, with its labels, taints, capacity, addresses and
// kubelet endpoint, the node is Ready again, its pod keeps running, and the
// pod's status, changed behind the agent's back meanwhile, is written
// again long before any periodic resync would.
func testNodeReregistration(t *testing.T, h *harness) {
	node := h.pool(t, "rereg", 1)[0]
	ns := h.namespace(t, "rereg")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)
	pod := runSleepers(t, admin, ns, "svc", "rereg", 1)[0]
	before := waitNode(t, admin, node.Name(), "Ready with its kubelet endpoint", func(n *v1.Node) bool {
		return nodeReady(n) && n.Status.DaemonEndpoints.KubeletEndpoint.Port != 0
	})

	// A status changed by someone else: a status-only change that does
	// not make the agent sync the pod, so only a check of the API
	// server's status puts it back.
	_, err := admin.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType,
		[]byte(`{"status":{"message":"changed behind the agent's back"}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, admin.CoreV1().Nodes().Delete(ctx, node.Name(), metav1.DeleteOptions{}))

	after := waitNode(t, admin, node.Name(), "registered again and Ready", func(n *v1.Node) bool {
		return n.UID != before.UID && nodeReady(n)
	})
	t.Logf("node registered again and Ready %v after its deletion", time.Since(start).Round(time.Millisecond))
	assert.Equal(t, before.Labels[poolLabel], after.Labels[poolLabel], "labels")
	assert.True(t, hasTaint(after, poolLabel, v1.TaintEffectNoSchedule), "taints: %v", after.Spec.Taints)
	assert.Equal(t, before.Status.Addresses, after.Status.Addresses, "addresses")
	assert.Equal(t, before.Status.DaemonEndpoints, after.Status.DaemonEndpoints, "the kubelet endpoint")
	assert.True(t, before.Status.Capacity.Cpu().Equal(*after.Status.Capacity.Cpu()), "capacity: %v", after.Status.Capacity)
	assert.Equal(t, before.Status.NodeInfo.KubeletVersion, after.Status.NodeInfo.KubeletVersion, "node info")

	pods := waitPods(t, admin, ns, "app=svc", "the pod's status written again", func(pods []v1.Pod) bool {
		return len(pods) == 1 && pods[0].UID == pod.UID && pods[0].Status.Message == "" && pods[0].Status.Phase == v1.PodRunning
	})
	took := time.Since(start)
	t.Logf("pod status written again %v after the node's deletion", took.Round(time.Millisecond))
	require.Less(t, took, statusResyncBound, "the status was put back by a periodic resync, not by the registration")
	requireProcesses(t, pods)

	// The kubelet API is reached at the endpoint registered again.
	h.kubectl.run(t, "logs", "-n", ns, pod.Name)
}
