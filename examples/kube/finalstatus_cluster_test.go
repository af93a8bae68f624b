package kube_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testClusterFinalStatusBurst: many pods created unbound, which the
// scheduler binds over the pool's nodes (each node learns of its pods, and
// its Node authorizer of their bindings, by an update), whose containers
// exit at once or as they start: each ends with its terminal phase and
// exit code in the API server.
func testClusterFinalStatusBurst(t *testing.T, h *harness) {
	const pool, n = "finalstatus", 24
	nodes := h.hostFilesPool(t, pool, 2)
	ns := h.namespace(t, pool)
	admin := h.c.Admin()
	start := time.Now()
	b := newBurst(t, n, "burst", clusterTimeout, func(_ int, p *v1.Pod) *v1.Pod {
		p.Namespace = ns
		p.Spec = inPool(p.Spec, pool)
		created, err := admin.CoreV1().Pods(ns).Create(testContextFor(t, clusterTimeout), p, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Empty(t, created.Spec.NodeName, "the pod is created unbound")
		return created
	})
	b.waitGatedRunning(t, admin)
	b.release(t)
	final := b.checkFinal(t, admin)

	perNode := map[string]int{}
	for _, p := range final {
		assert.Contains(t, names(nodes), p.Spec.NodeName, "pod %s is bound to a node of the pool", p.Name)
		assert.True(t, slices.ContainsFunc(p.Status.Conditions, func(c v1.PodCondition) bool {
			return c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue
		}), "pod %s was scheduled", p.Name)
		perNode[p.Spec.NodeName]++
	}
	assert.Len(t, perNode, len(nodes), "the scheduler spread the pods over the pool: %v", perNode)
	b.waitStopped(t)
	t.Logf("%d pods scheduled (%v) and ended, every final status in the API server, in %v",
		n, perNode, time.Since(start).Round(time.Millisecond))
}
