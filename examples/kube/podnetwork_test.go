package kube_test

import (
	"bufio"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
)

// The pod network, name resolution and graceful node shutdown of the
// cluster's nodes (issues 20 and 21), on the TestCluster harness.

// poolPod is a pod of pool's nodes named name, in namespace ns, running
// script.
func poolPod(ns, pool, name, script string) *v1.Pod {
	spec := inPool(scriptSpec(script), pool)
	spec.RestartPolicy = v1.RestartPolicyNever
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
}

// podLog returns the log of pod's container main.
func podLog(t *testing.T, h *harness, ns, name string) string {
	t.Helper()
	b, err := h.c.Admin().CoreV1().Pods(ns).GetLogs(name, &v1.PodLogOptions{Container: "main"}).DoRaw(testContextFor(t, clusterTimeout))
	require.NoError(t, err)
	return string(b)
}

// waitSucceeded waits for pod name of namespace ns to succeed and returns
// it as it then is.
func waitSucceeded(t *testing.T, h *harness, ns, name string) *v1.Pod {
	t.Helper()
	p, err := clustertest.WaitFor(testContextFor(t, clusterTimeout), h.c.Admin().CoreV1().Pods(ns), name, clustertest.Match("Succeeded", func(p *v1.Pod) bool {
		return p != nil && p.Status.Phase == v1.PodSucceeded
	}), clusterTimeout)
	require.NoError(t, err)
	return p
}

// testPodNetwork: a sandboxed pod gets an address of its node's
// spec.podCIDR, in status.podIP; two pods reach each other by it and the
// node reaches them; /etc/hosts names a pod by its hostname and
// subdomain; and a pod reaches neither etcd nor anything else on the
// host's loopback, and the kubelet API refuses it without credentials
// (the attack of issue 20).
func testPodNetwork(t *testing.T, h *harness) {
	requireBusybox(t)
	nodes := h.pool(t, "net", 1)
	ns := h.namespace(t, "net")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)
	node, err := admin.CoreV1().Nodes().Get(ctx, nodes[0].Name(), metav1.GetOptions{})
	require.NoError(t, err)
	podCIDR, err := netip.ParsePrefix(node.Spec.PodCIDR)
	require.NoError(t, err, "the node has a pod range")

	server := poolPod(ns, "net", "server", `mkdir -p /tmp/www && hostname > /tmp/www/index.html && exec busybox httpd -f -p 8080 -h /tmp/www`)
	server.Spec.Hostname, server.Spec.Subdomain = "web-0", "web"
	_, err = admin.CoreV1().Pods(ns).Create(ctx, server, metav1.CreateOptions{})
	require.NoError(t, err)
	running := waitPods(t, admin, ns, "", "the server Running with an IP", func(pods []v1.Pod) bool {
		return len(pods) == 1 && pods[0].Status.Phase == v1.PodRunning && pods[0].Status.PodIP != ""
	})
	ip := netip.MustParseAddr(running[0].Status.PodIP)
	assert.True(t, podCIDR.Contains(ip), "the pod's IP %s is in its node's range %s", ip, podCIDR)
	require.Len(t, running[0].Status.PodIPs, 1)
	assert.Equal(t, ip.String(), running[0].Status.PodIPs[0].IP)

	etcd, err := url.Parse(h.c.EtcdURL())
	require.NoError(t, err)
	kubelet := kubeletURL(t, h, nodes[0].Name())
	client := poolPod(ns, "net", "client", strings.Join([]string{
		`cat /etc/hosts`,
		`echo ---`,
		`for i in 1 2 3 4 5 6 7 8 9 10; do curl -sf --max-time 2 http://` + ip.String() + `:8080/ && break; sleep 0.5; done`,
		`busybox nc -w 2 ` + etcd.Hostname() + ` ` + etcd.Port() + ` </dev/null 2>/dev/null && echo etcd-reached || echo etcd-unreachable`,
		`echo kubelet $(curl -sk -o /dev/null -w '%{http_code}' ` + kubelet + `/pods)`,
	}, "; "))
	_, err = admin.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{})
	require.NoError(t, err)
	waitSucceeded(t, h, ns, "client")
	out := podLog(t, h, ns, "client")
	t.Logf("the client pod:\n%s", out)
	assert.Contains(t, out, "# Kubernetes-managed hosts file.\n")
	assert.Contains(t, out, "\n---\nweb-0\n", "the client reached the server by its IP")
	assert.Contains(t, out, "etcd-unreachable", "etcd listens on the host's loopback, out of a pod's reach")
	assert.NotContains(t, out, "etcd-reached")
	assert.Contains(t, out, "kubelet 401", "the kubelet API refuses a pod without credentials")

	server2 := poolPod(ns, "net", "hosts", `cat /etc/hosts; hostname`)
	server2.Spec.Hostname, server2.Spec.Subdomain = "db-0", "db"
	_, err = admin.CoreV1().Pods(ns).Create(ctx, server2, metav1.CreateOptions{})
	require.NoError(t, err)
	done := waitSucceeded(t, h, ns, "hosts")
	out = podLog(t, h, ns, "hosts")
	assert.Contains(t, out, done.Status.PodIP+"\tdb-0.db."+ns+".svc.cluster.local\tdb-0\n", "a StatefulSet-like pod is named by its headless service")
	assert.True(t, strings.HasSuffix(out, "db-0\n"), "its hostname: %q", out)
}

// testGracefulNodeShutdown: a node shut down gracefully gives its pod the
// 3 seconds its SIGTERM trap needs (within its grace period and the
// budget), where Close alone gives one: the pod ends Succeeded, its trap
// having run to the end.
func testGracefulNodeShutdown(t *testing.T, h *harness) {
	nodes := h.pool(t, "shutdown", 1)
	ns := h.namespace(t, "shutdown")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)
	pod := poolPod(ns, "shutdown", "patient", `trap 'echo term; sleep 3; echo cleaned; exit 0' TERM; echo ready; while true; do sleep 0.1; done`)
	pod.Spec.TerminationGracePeriodSeconds = new(int64(20))
	_, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPods(t, admin, ns, "", "Running", allRunning(1))
	// Its trap is set once it said so: its log is followed to that line
	// (the pod object does not change when it does, so a wait on the pod
	// would never see it).
	logs, err := admin.CoreV1().Pods(ns).GetLogs("patient", &v1.PodLogOptions{Container: "main", Follow: true}).Stream(ctx)
	require.NoError(t, err)
	lines := bufio.NewScanner(logs)
	for lines.Scan() && lines.Text() != "ready" {
	}
	require.NoError(t, lines.Err())
	require.Equal(t, "ready", lines.Text(), "the pod said its trap is set")
	require.NoError(t, logs.Close())

	start := time.Now()
	report, err := nodes[0].Shutdown(ctx, nodeshutdown.Budget{GracePeriod: 30 * time.Second, CriticalGracePeriod: 5 * time.Second})
	took := time.Since(start)
	require.NoError(t, err)
	require.Len(t, report.Terminated, 1)
	assert.Equal(t, int64(20), report.Terminated[0].GracePeriod, "the pod's own grace period, within the budget")
	assert.GreaterOrEqual(t, took, 3*time.Second, "the shutdown waited for the trap")

	final := waitSucceeded(t, h, ns, "patient")
	assert.Equal(t, "Terminated", final.Status.Reason)
	require.Len(t, final.Status.ContainerStatuses, 1)
	require.NotNil(t, final.Status.ContainerStatuses[0].State.Terminated)
	assert.Equal(t, int32(0), final.Status.ContainerStatuses[0].State.Terminated.ExitCode, "the trap ran to its end")
	log := podLog(t, h, ns, "patient")
	assert.Contains(t, log, "term\n")
	assert.Contains(t, log, "cleaned\n", "the trap ran to its end")
}
