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

// staticPod returns a static pod for node, prepared as a manifest source
// would prepare it.
func staticPod(t *testing.T, node, name string) *v1.Pod {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{mirror.ConfigSourceAnnotationKey: mirror.FileSource},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "none", Command: []string{"/bin/true"}}},
		},
	}
	require.NoError(t, mirror.PrepareStaticPod(pod, node, mirror.FileSource))
	return pod
}

// testMirrorClient drives mirror.Client over mirrorpods.PodAPI and mirrorpods.NodeUID,
// with the node's own identity, against the real API server.
func testMirrorClient(t *testing.T, c *cluster) {
	const node = "mirror-node"
	ctx := testContext(t)
	cs := c.nodeClient(t, node)

	// Without a Node there is no UID to own the mirror.
	client, err := mirror.NewClient(mirrorpods.NewPodAPI(cs.CoreV1()), mirror.ClientOptions{NodeName: node, NodeUID: mirrorpods.NodeUID(cs.CoreV1(), node)})
	require.NoError(t, err)
	pod := staticPod(t, node, "web")
	err = client.CreateMirrorPod(ctx, pod)
	require.Error(t, err)
	assert.True(t, apierrors.IsNotFound(err), "want the Node lookup's NotFound, got %v", err)

	registered := c.registerNode(t, node)
	again, err := nodestatus.Register(ctx, cs.CoreV1(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	require.NoError(t, err, "registering an existing node reuses it")
	assert.Equal(t, registered.UID, again.UID)

	require.NoError(t, client.CreateMirrorPod(ctx, pod))
	got, err := c.admin.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, mirror.IsMirrorPodOf(got, pod), "the stored pod is the mirror of the static pod")
	assert.Equal(t, []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: node, UID: registered.UID, Controller: ptr.To(true),
	}}, got.OwnerReferences)
	assert.Equal(t, node, got.Spec.NodeName)

	// The node reads the mirror back below; wait until the Node authorizer
	// knows it is bound to the node.
	waitForPod(t, cs, pod.Namespace, pod.Name, "readable by the node", podUIDIs(got.UID))

	// Creating it again is a success (D5): the same hash is already there.
	require.NoError(t, client.CreateMirrorPod(ctx, pod))

	// A UID precondition protects a pod of the same name.
	wrong := types.UID("not-the-mirror")
	deleted, err := client.DeleteMirrorPod(ctx, mirror.PodFullName(pod), &wrong)
	require.NoError(t, err)
	assert.False(t, deleted)
	_, err = c.admin.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err, "a delete with another UID leaves the mirror alone")

	deleted, err = client.DeleteMirrorPod(ctx, mirror.PodFullName(pod), &got.UID)
	require.NoError(t, err)
	assert.True(t, deleted)
	_, err = c.admin.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the mirror is gone at once (grace 0): %v", err)

	// Deleting a mirror that is gone is not an error. Under the Node
	// authorizer a node may not read a pod that is not bound to it, and a
	// pod that does not exist is not, so the client's read is Forbidden
	// where an administrator's is NotFound; with the mirror's UID given the
	// client deletes by that UID, and the API server answers NotFound.
	adminClient, err := mirror.NewClient(mirrorpods.NewPodAPI(c.admin.CoreV1()), mirror.ClientOptions{NodeName: node, NodeUID: mirrorpods.NodeUID(c.admin.CoreV1(), node)})
	require.NoError(t, err)
	deleted, err = adminClient.DeleteMirrorPod(ctx, mirror.PodFullName(pod), nil)
	require.NoError(t, err)
	assert.False(t, deleted, "deleting a missing mirror is not an error")
	deleted, err = client.DeleteMirrorPod(ctx, mirror.PodFullName(pod), &got.UID)
	require.NoError(t, err, "a node deleting a missing mirror by its UID")
	assert.False(t, deleted)
	// The Node authorizer forgets the deleted pod's binding a moment after
	// the delete (until then the node may read it, and sees NotFound).
	waitForPod(t, cs, pod.Namespace, pod.Name, "unreadable to the node", func(p *v1.Pod) bool {
		_, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsForbidden(err)
	})
	_, err = client.DeleteMirrorPod(ctx, mirror.PodFullName(pod), nil)
	assert.True(t, apierrors.IsForbidden(err), "without a UID nothing tells a missing pod from one the node may not see: %v", err)
}
