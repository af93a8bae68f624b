package kube_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/apisource"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
)

// apiPod returns a pod bound to node that runs command under restartPolicy
// Never.
func apiPod(name, node string, command ...string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:      node,
			RestartPolicy: v1.RestartPolicyNever,
			Containers:    []v1.Container{{Name: "main", Image: "none", Command: command}},
		},
	}
}

// nextUpdate returns the next update of config, failing t at the deadline.
func nextUpdate(t *testing.T, ctx context.Context, config *podconfig.Config) podconfig.PodUpdate {
	t.Helper()
	select {
	case u := <-config.Updates():
		t.Logf("update %s from %q: %v", u.Op, u.Source, uidsOf(u.Pods))
		return u
	case <-ctx.Done():
		t.Fatalf("no update from the API source: %v", ctx.Err())
		return podconfig.PodUpdate{}
	}
}

func uidsOf(pods []*v1.Pod) []types.UID {
	var out []types.UID
	for _, p := range pods {
		out = append(out, p.UID)
	}
	return out
}

// testAPISource runs apisource.Source, as the node itself, into a real
// podconfig.Config: the node's pods, and only they, arrive as PodUpdates
// of the "api" source, first as one complete snapshot, then change by
// change.
func testAPISource(t *testing.T, c *cluster) {
	const node = "source-node"
	ctx := testContext(t)
	c.registerNode(t, node)
	pods := c.admin.CoreV1().Pods("default")

	// Pods that exist before the source starts, one of them for another
	// node.
	first, err := pods.Create(ctx, apiPod("src-first", node, "/bin/true"), metav1.CreateOptions{})
	require.NoError(t, err)
	second, err := pods.Create(ctx, apiPod("src-second", node, "/bin/true"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pods.Create(ctx, apiPod("src-elsewhere", "ident-b", "/bin/true"), metav1.CreateOptions{})
	require.NoError(t, err)

	config, err := podconfig.New(podconfig.Options{})
	require.NoError(t, err)
	src, err := apisource.New(c.nodeClient(t, node).CoreV1(), node, apisource.Options{})
	require.NoError(t, err)
	assert.Equal(t, mirror.ApiserverSource, src.Source())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx, config) }()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()

	// The first snapshot is complete: both pods in one ADD.
	u := nextUpdate(t, ctx, config)
	assert.Equal(t, podconfig.OpAdd, u.Op)
	assert.Equal(t, mirror.ApiserverSource, u.Source)
	assert.ElementsMatch(t, []types.UID{first.UID, second.UID}, uidsOf(u.Pods))
	for _, p := range u.Pods {
		assert.Equal(t, mirror.ApiserverSource, p.Annotations[mirror.ConfigSourceAnnotationKey], "stamped as the api source")
		assert.False(t, mirror.IsStaticPod(p))
	}

	// A new pod is an ADD; a label change an UPDATE; a graceful deletion a
	// DELETE; a status change a RECONCILE; a pod that is gone a REMOVE.
	third, err := pods.Create(ctx, apiPod("src-third", node, "/bin/true"), metav1.CreateOptions{})
	require.NoError(t, err)
	u = nextUpdate(t, ctx, config)
	assert.Equal(t, podconfig.OpAdd, u.Op)
	assert.Equal(t, []types.UID{third.UID}, uidsOf(u.Pods))

	_, err = pods.Patch(ctx, first.Name, types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"k":"v"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	u = nextUpdate(t, ctx, config)
	assert.Equal(t, podconfig.OpUpdate, u.Op)
	assert.Equal(t, []types.UID{first.UID}, uidsOf(u.Pods))
	assert.Equal(t, "v", u.Pods[0].Labels["k"])

	_, err = pods.Patch(ctx, second.Name, types.StrategicMergePatchType, []byte(`{"status":{"message":"hello"}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	u = nextUpdate(t, ctx, config)
	assert.Equal(t, podconfig.OpReconcile, u.Op)
	assert.Equal(t, []types.UID{second.UID}, uidsOf(u.Pods))

	require.NoError(t, pods.Delete(ctx, second.Name, metav1.DeleteOptions{}))
	u = nextUpdate(t, ctx, config)
	assert.Equal(t, podconfig.OpDelete, u.Op)
	assert.Equal(t, []types.UID{second.UID}, uidsOf(u.Pods))
	assert.NotNil(t, u.Pods[0].DeletionTimestamp)

	// A force delete of a pod bound to a node is first seen as a deletion
	// timestamp (a DELETE), then as the pod's removal.
	require.NoError(t, pods.Delete(ctx, third.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	u = nextUpdate(t, ctx, config)
	if u.Op == podconfig.OpDelete {
		assert.Equal(t, []types.UID{third.UID}, uidsOf(u.Pods))
		u = nextUpdate(t, ctx, config)
	}
	assert.Equal(t, podconfig.OpRemove, u.Op)
	assert.Equal(t, []types.UID{third.UID}, uidsOf(u.Pods))
}
