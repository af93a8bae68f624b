package kube_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
)

// stubbornPod returns a pod on node whose container, on SIGTERM, waits for
// the file $dir/go before it exits 0; it touches $dir/trapped once its
// trap is set.
func stubbornPod(name, node, dir string) *v1.Pod {
	return apiPod(name, node, shell(dir,
		`trap 'while [ ! -e $D/go ]; do sleep 0.05; done; exit 0' TERM; touch $D/trapped; while true; do sleep 0.05; done`)...)
}

// disrupted reports whether p is Running with a True DisruptionTarget
// condition: its termination started and is not over.
func disrupted(p *v1.Pod) bool {
	if p == nil || p.Status.Phase != v1.PodRunning {
		return false
	}
	c := condition(p, v1.DisruptionTarget)
	return c != nil && c.Status == v1.ConditionTrue
}

// testAgentEviction: an evicted pod shows DisruptionTarget while it stops,
// then ends Failed with reason Evicted, and its events say why.
func testAgentEviction(t *testing.T, c *cluster) {
	const node = "evict-node"
	const message = "The node was low on resource: memory."
	dir := t.TempDir()
	a := hostFilesAgent(t, c, node, t.TempDir(), "")
	pod := createPod(t, c, stubbornPod("evictee", node, dir))
	waitForPod(t, c.admin, "default", pod.Name, "Running", isPhase(v1.PodRunning))
	waitForFile(t, filepath.Join(dir, "trapped"))

	evicted := make(chan error, 1)
	go func() { evicted <- a.agent.EvictPod(testContext(t), pod.UID, message, 30) }()
	during := waitForPod(t, c.admin, "default", pod.Name, "DisruptionTarget while it stops", disrupted)
	assert.NotEmpty(t, processesOf(t, pod.UID), "the pod's process still runs")
	assert.Equal(t, v1.PodReasonTerminationByKubelet, condition(during, v1.DisruptionTarget).Reason)
	assert.Equal(t, message, condition(during, v1.DisruptionTarget).Message)
	assert.Equal(t, during.Generation, condition(during, v1.DisruptionTarget).ObservedGeneration, "the condition observes the pod's generation")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o600))
	require.NoError(t, <-evicted)

	final := waitForPod(t, c.admin, "default", pod.Name, "Failed", isPhase(v1.PodFailed))
	assert.Equal(t, "Evicted", final.Status.Reason)
	assert.Equal(t, message, final.Status.Message)
	target := condition(final, v1.DisruptionTarget)
	require.NotNil(t, target)
	assert.Equal(t, v1.ConditionTrue, target.Status)
	assert.Equal(t, condition(during, v1.DisruptionTarget).LastTransitionTime, target.LastTransitionTime, "the condition did not change, nor its time")
	assert.Equal(t, final.Generation, target.ObservedGeneration)
	assert.Equal(t, final.Generation, final.Status.ObservedGeneration)
	assert.Empty(t, processesOf(t, pod.UID))
	waitForEvent(t, c.admin, "default", string(pod.UID), eventMatch{v1.EventTypeWarning, "Evicted", "", message, 0})
	waitForEvent(t, c.admin, "default", string(pod.UID), eventMatch{v1.EventTypeNormal, "Killing", "spec.containers{main}", "Stopping container main", 0})
	assert.Error(t, a.agent.EvictPod(testContext(t), "no-such-uid", message, 0))
}

// testAgentShutdown: a node shutdown posts the Node NotReady, records its
// events, and ends every pod Failed with reason Terminated and a
// DisruptionTarget condition shown while they stop.
func testAgentShutdown(t *testing.T, c *cluster) {
	const node = "shutdown-node"
	dir := t.TempDir()
	a := runAgent(t, agent.Config{Client: c.nodeClient(t, node), NodeName: node, StateDir: t.TempDir(), HeartbeatInterval: 200 * time.Millisecond, Sandbox: processruntime.SandboxOff})
	stubborn := createPod(t, c, stubbornPod("shutdown-stubborn", node, dir))
	plain := createPod(t, c, apiPod("shutdown-plain", node, shell(dir, `while true; do sleep 0.05; done`)...))
	for _, p := range []*v1.Pod{stubborn, plain} {
		waitForPod(t, c.admin, "default", p.Name, "Running", isPhase(v1.PodRunning))
	}
	waitForFile(t, filepath.Join(dir, "trapped"))
	waitForNodeReady(t, c, node)

	type result struct {
		report nodeshutdown.Report
		err    error
	}
	done := make(chan result, 1)
	go func() {
		r, err := a.agent.ShutdownNode(testContext(t), nodeshutdown.Budget{GracePeriod: 30 * time.Second})
		done <- result{r, err}
	}()
	waitForPod(t, c.admin, "default", stubborn.Name, "DisruptionTarget while it stops", disrupted)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o600))
	r := <-done
	require.NoError(t, r.err)
	assert.Len(t, r.report.Terminated, 2)

	// The stubborn container exits 0 on SIGTERM: its pod succeeded. The
	// other dies of the signal.
	for p, phase := range map[*v1.Pod]v1.PodPhase{stubborn: v1.PodSucceeded, plain: v1.PodFailed} {
		final := waitForPod(t, c.admin, "default", p.Name, string(phase), isPhase(phase))
		assert.Equal(t, "Terminated", final.Status.Reason, p.Name)
		assert.Equal(t, "Pod was terminated in response to imminent node shutdown.", final.Status.Message, p.Name)
		target := condition(final, v1.DisruptionTarget)
		if assert.NotNil(t, target, p.Name) {
			assert.Equal(t, v1.ConditionTrue, target.Status)
			assert.Equal(t, v1.PodReasonTerminationByKubelet, target.Reason)
			assert.Positive(t, final.Generation)
			assert.Equal(t, final.Generation, target.ObservedGeneration, "%s: the condition observes the pod's generation", p.Name)
		}
		waitForEvent(t, c.admin, "default", string(p.UID), eventMatch{v1.EventTypeNormal, "Killing", "spec.containers{main}", "Stopping container main", 0})
	}

	n, err := c.admin.CoreV1().Nodes().Get(testContext(t), node, metav1.GetOptions{})
	require.NoError(t, err)
	waitForEvent(t, c.admin, "default", string(n.UID), eventMatch{v1.EventTypeNormal, "Shutdown", "", "Shutdown manager detected shutdown event", 0})
	waitForEvent(t, c.admin, "default", string(n.UID), eventMatch{v1.EventTypeNormal, "NodeNotReady", "", "Node shutdown-node status is now: NodeNotReady", 0})
	n, err = c.admin.CoreV1().Nodes().Get(testContext(t), node, metav1.GetOptions{})
	require.NoError(t, err)
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady {
			assert.Equal(t, v1.ConditionFalse, cond.Status)
			assert.Equal(t, "KubeletNotReady", cond.Reason, "the kubelet's reason, which dashboards match on")
			assert.Equal(t, "node is shutting down", cond.Message)
		}
	}
}
