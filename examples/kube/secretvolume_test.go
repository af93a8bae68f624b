package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testSecretVolume: a secret volume (distribute-credentials-secure's
// "Create a Pod that has access to the secret data through a Volume",
// with busybox for nginx) holds the secret's keys as files, read-only,
// mode 0644 by default (defaultMode 0400 here: the kubelet's rule).
func testSecretVolume(t *testing.T, h *harness) {
	h.sandboxedPool(t, "secretvol", 1)
	ns := h.namespace(t, "secretvol")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)
	_, err := admin.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "test-secret"},
		StringData: map[string]string{"username": "my-app", "password": "39528$vdg7Jb"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := poolPod(ns, "secretvol", "secret-test-pod", `cat /etc/secret-volume/username; echo; stat -L -c %a /etc/secret-volume/password; touch /etc/secret-volume/x 2>/dev/null && echo writable || echo read-only`)
	mode := int32(0o400)
	pod.Spec.Volumes = []v1.Volume{{Name: "secret-volume", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "test-secret", DefaultMode: &mode}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "secret-volume", MountPath: "/etc/secret-volume", ReadOnly: true}}
	_, err = admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitSucceeded(t, h, ns, pod.Name)
	assert.Equal(t, "my-app\n400\nread-only\n", podLog(t, h, ns, pod.Name))
}
