package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// emptyDirLimitManifest is a pod of the kind "Local ephemeral storage"
// (kubernetes.io/docs/concepts/configuration/manage-resources-containers)
// shows: an emptyDir with a sizeLimit, here written past it, 4 MiB into
// a 1Mi volume; and a second pod that stays under its limit.
const emptyDirLimitManifest = `
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "dd if=/dev/zero of=/cache/fill bs=1024 count=%d && exec sleep 3600"]
    volumeMounts: [{name: ephemeral, mountPath: /cache}]
  volumes:
  - name: ephemeral
    emptyDir: {sizeLimit: 1Mi}
`

// testEmptyDirSizeLimit: a pod whose emptyDir holds more than its
// sizeLimit is evicted, as by the kubelet's eviction manager: phase
// Failed, reason Evicted, the kubelet's message, a SizeLimitExceeded and
// an Evicted event; a pod under its limit runs on.
func testEmptyDirSizeLimit(t *testing.T, h *harness) {
	h.fastVolumesPool(t, "emptydir", 1)
	ns := h.namespace(t, "emptydir")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)
	create := func(name string, kib int) *v1.Pod {
		var pod v1.Pod
		require.NoError(t, yaml.UnmarshalStrict([]byte(fmt.Sprintf(emptyDirLimitManifest, name, kib)), &pod))
		pod.Spec = inPool(pod.Spec, "emptydir")
		created, err := admin.CoreV1().Pods(ns).Create(ctx, &pod, metav1.CreateOptions{})
		require.NoError(t, err)
		return created
	}
	under := create("under", 256)
	waitPods(t, admin, ns, "", "the pod under its limit Running", func(pods []v1.Pod) bool {
		return len(pods) == 1 && pods[0].Status.Phase == v1.PodRunning
	})
	over := create("over", 4096)

	const msg = `Usage of EmptyDir volume "ephemeral" exceeds the limit "1Mi".`
	var evicted *v1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, clusterTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, over.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		evicted = p
		return p.Status.Phase == v1.PodFailed, nil
	})
	require.NoError(t, err, "the pod over its limit fails: %+v", evicted.Status)
	assert.Equal(t, "Evicted", evicted.Status.Reason)
	assert.Equal(t, msg, evicted.Status.Message)
	assert.True(t, eventComes(ctx, t, h, ns, over.Name, "SizeLimitExceeded", msg))
	assert.True(t, eventComes(ctx, t, h, ns, over.Name, "Evicted", msg))

	// The pod under its limit has been measured as often (every
	// fastVolumeRefresh) and runs on.
	p, err := admin.CoreV1().Pods(ns).Get(ctx, under.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1.PodRunning, p.Status.Phase, "the pod under its limit: %+v", p.Status)
	assert.False(t, hasEvent(ctx, t, h, ns, under.Name, "SizeLimitExceeded", ""))
}
