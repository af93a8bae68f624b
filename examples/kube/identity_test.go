package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/mirrorpods"
	"github.com/podkit/podkit/examples/kube/nodestatus"
	"github.com/podkit/podkit/mirror"
)

// testNodeIdentityRefusals checks what the API server refuses a node
// identity (system:node:ident-a) that the agent never needs: a pod that is
// not a mirror, and any write to another node's pods or Node. The agent
// tests show that everything the agent does need is allowed.
func testNodeIdentityRefusals(t *testing.T, c *cluster) {
	ctx := testContext(t)
	a := c.nodeClient(t, "ident-a")
	nodeA := c.registerNode(t, "ident-a")
	nodeB := c.registerNode(t, "ident-b")

	// A pod of node b, created by an administrator.
	other, err := c.admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "b-pod"},
		Spec: v1.PodSpec{
			NodeName:   "ident-b",
			Containers: []v1.Container{{Name: "c", Image: "none", Command: []string{"/bin/true"}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("a non-mirror pod", func(t *testing.T) {
		_, err := a.CoreV1().Pods("default").Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sneaky"},
			Spec: v1.PodSpec{
				NodeName:   "ident-a",
				Containers: []v1.Container{{Name: "c", Image: "none"}},
			},
		}, metav1.CreateOptions{})
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.ErrorContains(t, err, `pod does not have "kubernetes.io/config.mirror" annotation, node "ident-a" can only create mirror pods`)
	})

	t.Run("a mirror pod on another node", func(t *testing.T) {
		pod := staticPod(t, "ident-b", "web")
		pod.UID = ""
		pod.Annotations[mirror.ConfigMirrorAnnotationKey] = pod.Annotations[mirror.ConfigHashAnnotationKey]
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "ident-b", UID: nodeB.UID, Controller: ptr.To(true)}}
		_, err := a.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.ErrorContains(t, err, `node "ident-a" can only create pods with spec.nodeName set to itself`)
	})

	t.Run("a mirror pod owned by another node", func(t *testing.T) {
		pod := staticPod(t, "ident-a", "owned")
		pod.UID = ""
		pod.Annotations[mirror.ConfigMirrorAnnotationKey] = pod.Annotations[mirror.ConfigHashAnnotationKey]
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "ident-b", UID: nodeB.UID, Controller: ptr.To(true)}}
		_, err := a.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		require.Error(t, err)
		assert.ErrorContains(t, err, `node "ident-a" can only create pods with an owner reference set to itself`)
	})

	t.Run("the status of another node's pod", func(t *testing.T) {
		_, err := a.CoreV1().Pods("default").Patch(ctx, other.Name, types.StrategicMergePatchType,
			[]byte(`{"status":{"phase":"Running"}}`), metav1.PatchOptions{}, "status")
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.ErrorContains(t, err, `node "ident-a" can only update pod status for pods with spec.nodeName set to itself`)
	})

	t.Run("deleting another node's pod", func(t *testing.T) {
		err := a.CoreV1().Pods("default").Delete(ctx, other.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &other.UID},
		})
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.ErrorContains(t, err, `node "ident-a" can only delete pods with spec.nodeName set to itself`)
		_, err = c.admin.CoreV1().Pods("default").Get(ctx, other.Name, metav1.GetOptions{})
		assert.NoError(t, err, "the pod survives")
	})

	t.Run("reading another node's pod", func(t *testing.T) {
		_, err := a.CoreV1().Pods("default").Get(ctx, other.Name, metav1.GetOptions{})
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.ErrorContains(t, err, `no relationship found between node 'ident-a' and this object`)
	})

	t.Run("listing pods beyond its own", func(t *testing.T) {
		_, err := a.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		require.Error(t, err)
		assert.ErrorContains(t, err, `can only list/watch pods with spec.nodeName field selector`)
		_, err = a.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=ident-b"})
		require.Error(t, err)
		assert.ErrorContains(t, err, `can only list/watch pods with spec.nodeName field selector`)
	})

	t.Run("another node's Node", func(t *testing.T) {
		_, err := a.CoreV1().Nodes().Patch(ctx, "ident-b", types.StrategicMergePatchType,
			[]byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		require.Error(t, err)
		assert.ErrorContains(t, err, `node "ident-a" is not allowed to modify node "ident-b"`)
		_, err = mirrorpods.NodeUID(a.CoreV1(), "ident-b")(ctx)
		require.Error(t, err)
		assert.ErrorContains(t, err, `node 'ident-a' cannot read 'ident-b', only its own Node object`)
	})

	// What the agent needs is allowed.
	uid, err := mirrorpods.NodeUID(a.CoreV1(), "ident-a")(ctx)
	require.NoError(t, err)
	assert.Equal(t, nodeA.UID, uid)
	hb := &nodestatus.Heartbeat{Client: a, NodeName: "ident-a"}
	require.NoError(t, hb.Beat(ctx), "a node may write its own status and lease")
	n, err := a.CoreV1().Nodes().Get(ctx, "ident-a", metav1.GetOptions{})
	require.NoError(t, err)
	var ready *v1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			ready = &n.Status.Conditions[i]
		}
	}
	require.NotNil(t, ready, "the heartbeat set the Ready condition")
	assert.Equal(t, v1.ConditionTrue, ready.Status)
	lease, err := c.admin.CoordinationV1().Leases(nodestatus.LeaseNamespace).Get(ctx, "ident-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "ident-a", ptr.Deref(lease.Spec.HolderIdentity, ""))
	require.NoError(t, hb.Beat(ctx), "a second beat renews")
}
