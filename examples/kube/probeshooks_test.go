package kube_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// probesHooksManifest has, in one busybox pod, what the documentation's
// probe and hook pages show with images a node runs here
// (configure-liveness-readiness-startup-probes, attach-handler-lifecycle-event):
// an httpGet liveness probe whose page goes away, a tcpSocket liveness
// probe on a port nothing listens on (each container is healthy once
// restarted: a probe failing for good would flood the pod's events past
// the recorder's spam filter, on a kubelet too), a startup probe that
// holds the others back until a file appears, and postStart and preStop
// exec hooks.
const probesHooksManifest = `
apiVersion: v1
kind: Pod
metadata: {name: probes-hooks}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: http
    image: busybox:1.36
    command: [sh, -c, 'mkdir -p /tmp/www; echo ok > /tmp/www/healthz; if [ ! -e /tmp/http-ran ]; then touch /tmp/http-ran; (sleep 3; rm /tmp/www/healthz) & fi; exec busybox httpd -f -p 8080 -h /tmp/www']
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
      failureThreshold: 2
  - name: tcp
    image: busybox:1.36
    command: [sh, -c, 'if [ -e /tmp/tcp-ran ]; then mkdir -p /tmp/tcp; exec busybox httpd -f -p 9999 -h /tmp/tcp; fi; touch /tmp/tcp-ran; exec sleep 3600']
    livenessProbe:
      tcpSocket: {port: 9999}
      initialDelaySeconds: 1
      periodSeconds: 1
      failureThreshold: 2
  - name: slow
    image: busybox:1.36
    command: [sh, -c, 'sleep 3; touch /tmp/started; exec sleep 3600']
    startupProbe:
      exec: {command: [test, -f, /tmp/started]}
      periodSeconds: 1
      failureThreshold: 30
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
  - name: hooks
    image: busybox:1.36
    command: [sh, -c, 'trap "cat /tmp/prestop; exit 0" TERM; while true; do sleep 0.2; done']
    lifecycle:
      postStart:
        exec: {command: [sh, -c, 'echo poststart-ran > /tmp/poststart']}
      preStop:
        exec: {command: [sh, -c, 'echo prestop-ran > /tmp/prestop']}
`

// testProbesAndHooks: on a podkit node, as on a kubelet, a failing
// httpGet or tcpSocket liveness probe restarts its container with
// Unhealthy and Killing events; a startup probe keeps the container
// unstarted and unready until it passes; a postStart hook runs when its
// container starts and a preStop hook before its container is stopped.
func testProbesAndHooks(t *testing.T, h *harness) {
	requireBusybox(t)
	h.sandboxedPool(t, "probes", 1)
	ns := h.namespace(t, "probes")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)
	var pod v1.Pod
	require.NoError(t, yaml.UnmarshalStrict([]byte(probesHooksManifest), &pod))
	pod.Spec = inPool(pod.Spec, "probes")
	created, err := admin.CoreV1().Pods(ns).Create(ctx, &pod, metav1.CreateOptions{})
	require.NoError(t, err)

	container := func(p *v1.Pod, name string) v1.ContainerStatus {
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == name {
				return c
			}
		}
		return v1.ContainerStatus{}
	}
	// The startup probe holds the slow container unstarted and unready
	// until its file appears (3 s in).
	sawUnstarted := false
	var last *v1.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, clusterTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		slow := container(p, "slow")
		if slow.State.Running != nil && (slow.Started == nil || !*slow.Started) {
			sawUnstarted = true
			assert.False(t, slow.Ready, "not ready before its startup probe passed")
		}
		return slow.Started != nil && *slow.Started && slow.Ready &&
			container(p, "http").RestartCount >= 1 && container(p, "tcp").RestartCount >= 1, nil
	})
	require.NoError(t, err, "the slow container started and the two liveness probes restarted theirs: %+v", last.Status.ContainerStatuses)
	assert.True(t, sawUnstarted, "the slow container ran unstarted first")
	for _, e := range []struct{ reason, msg string }{
		{"Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 404"},
		{"Killing", "Container http failed liveness probe, will be restarted"},
		{"Unhealthy", "Liveness probe failed: dial tcp"},
		{"Killing", "Container tcp failed liveness probe, will be restarted"},
		{"Unhealthy", "Startup probe failed"},
	} {
		assert.True(t, eventComes(ctx, t, h, ns, created.Name, e.reason, e.msg), "event %s %q", e.reason, e.msg)
	}

	// postStart ran in its container.
	assert.Equal(t, "poststart-ran\n", h.kubectl.run(t, "exec", "-n", ns, created.Name, "-c", "hooks", "--", "cat", "/tmp/poststart"))
	// preStop runs before the container gets its SIGTERM: the trap prints
	// what the hook wrote, to the log a follower reads to its end.
	logs, err := admin.CoreV1().Pods(ns).GetLogs(created.Name, &v1.PodLogOptions{Container: "hooks", Follow: true}).Stream(ctx)
	require.NoError(t, err)
	defer logs.Close()
	require.NoError(t, admin.CoreV1().Pods(ns).Delete(ctx, created.Name, metav1.DeleteOptions{}))
	out, err := io.ReadAll(logs)
	require.NoError(t, err)
	// (The shell may say "Terminated" of its sleep, which got the signal
	// too, before or after.)
	assert.Contains(t, string(out), "prestop-ran\n", "the preStop hook ran before SIGTERM")
}
