package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testServiceLinks: a pod's environment holds the service variables a
// kubelet gives it: the default namespace's kubernetes Service, and the
// Services of the pod's namespace that have a cluster IP; with
// enableServiceLinks false, the first only.
func testServiceLinks(t *testing.T, h *harness) {
	h.pool(t, "links", 1)
	ns := h.namespace(t, "links")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)
	svc, err := admin.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "redis-primary"},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "redis"}, Ports: []v1.ServicePort{{Name: "redis", Port: 6379}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, svc.Spec.ClusterIP, "the API server gave the service a cluster IP")
	kubernetes, err := admin.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)

	run := func(name string, links bool) string {
		pod := poolPod(ns, "links", name, `env | sort`)
		pod.Spec.EnableServiceLinks = &links
		_, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		waitSucceeded(t, h, ns, name)
		return podLog(t, h, ns, name)
	}
	env := run("linked", true)
	assert.Contains(t, env, "KUBERNETES_SERVICE_HOST="+kubernetes.Spec.ClusterIP+"\n")
	assert.Contains(t, env, "KUBERNETES_PORT=tcp://"+kubernetes.Spec.ClusterIP+":443\n")
	assert.Contains(t, env, "REDIS_PRIMARY_SERVICE_HOST="+svc.Spec.ClusterIP+"\n")
	assert.Contains(t, env, "REDIS_PRIMARY_SERVICE_PORT_REDIS=6379\n")
	assert.Contains(t, env, "REDIS_PRIMARY_PORT_6379_TCP=tcp://"+svc.Spec.ClusterIP+":6379\n")

	env = run("unlinked", false)
	assert.Contains(t, env, "KUBERNETES_SERVICE_HOST="+kubernetes.Spec.ClusterIP+"\n", "the master service's, always")
	assert.NotContains(t, env, "REDIS_PRIMARY_", "no variables of the namespace's services without links")
}
