package kube_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// The manifests of Kubernetes' documentation for the per-pod features, as
// a user would apply them, each with the one change podkit needs: a
// command where the image's entrypoint would be (the process runtime runs
// the host's programs), and shorter periods. From
// kubernetes.io/docs/tasks/configure-pod-container/:
//
//   - configure-pod-configmap "Define container environment variables
//     using ConfigMap data", with a key of a Secret as in
//     inject-data-application/distribute-credentials-secure "Define
//     container environment variables using Secret data";
//   - configure-pod-configmap "Add ConfigMap data to a Volume";
//   - configure-liveness-readiness-startup-probes "Define a TCP readiness
//     probe", on a port nothing listens on;
//   - configure-liveness-readiness-startup-probes "Define a liveness
//     command" (liveness-exec: a file that goes away).
const (
	featureObjects = `
apiVersion: v1
kind: ConfigMap
metadata: {name: special-config}
data: {special.how: very, special.type: charm}
---
apiVersion: v1
kind: Secret
metadata: {name: backend-user}
stringData: {backend-username: backend-admin}
`
	envPodManifest = `
apiVersion: v1
kind: Pod
metadata: {name: dapi-test-pod}
spec:
  containers:
  - name: test-container
    image: registry.k8s.io/busybox
    command: ["/bin/sh", "-c", "env"]
    env:
    - name: SPECIAL_LEVEL_KEY
      valueFrom: {configMapKeyRef: {name: special-config, key: special.how}}
    - name: SECRET_USERNAME
      valueFrom: {secretKeyRef: {name: backend-user, key: backend-username}}
  restartPolicy: Never
`
	volumePodManifest = `
apiVersion: v1
kind: Pod
metadata: {name: dapi-test-pod-volume}
spec:
  containers:
  - name: test-container
    image: registry.k8s.io/busybox
    command: ["/bin/sh", "-c", "cat /etc/config/special.how; echo; ls /etc/config/"]
    volumeMounts:
    - {name: config-volume, mountPath: /etc/config}
  volumes:
  - name: config-volume
    configMap: {name: special-config}
  restartPolicy: Never
`
	readinessPodManifest = `
apiVersion: v1
kind: Pod
metadata: {name: goproxy, labels: {app: goproxy}}
spec:
  containers:
  - name: goproxy
    image: registry.k8s.io/goproxy:0.1
    command: ["sleep", "3600"]
    readinessProbe:
      tcpSocket: {port: %d}
      initialDelaySeconds: 1
      periodSeconds: 1
`
	livenessPodManifest = `
apiVersion: v1
kind: Pod
metadata: {name: liveness-exec, labels: {test: liveness}}
spec:
  containers:
  - name: liveness
    image: registry.k8s.io/busybox
    command: ["/bin/sh", "-c", "touch /tmp/healthy; sleep 3; rm -f /tmp/healthy; sleep 600"]
    livenessProbe:
      exec: {command: [cat, /tmp/healthy]}
      initialDelaySeconds: 1
      periodSeconds: 1
`
)

// testFeatureManifests: the documented manifests of env, a configMap
// volume, a tcp readiness probe and an exec liveness probe behave on
// podkit nodes as on a kubelet. The pods that need their own mount
// namespace (the volume; the liveness file in the pod's own /tmp) run on a
// sandboxed node (a sandboxedPool); the readiness probe's pod runs on an
// unsandboxed one, in the host's network, where the agent can reach its
// port.
func testFeatureManifests(t *testing.T, h *harness) {
	h.sandboxedPool(t, "features", 1)
	h.pool(t, "features-host", 1)
	ns := h.namespace(t, "features")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)
	for _, doc := range strings.Split(featureObjects, "---") {
		if strings.Contains(doc, "kind: ConfigMap") {
			var cm v1.ConfigMap
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &cm))
			_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &cm, metav1.CreateOptions{})
			require.NoError(t, err)
		} else {
			var s v1.Secret
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &s))
			_, err := admin.CoreV1().Secrets(ns).Create(ctx, &s, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	create := func(manifest, pool string) *v1.Pod {
		var pod v1.Pod
		require.NoError(t, yaml.UnmarshalStrict([]byte(manifest), &pod))
		pod.Spec = inPool(pod.Spec, pool)
		created, err := admin.CoreV1().Pods(ns).Create(ctx, &pod, metav1.CreateOptions{})
		require.NoError(t, err)
		return created
	}
	envPod := create(envPodManifest, "features")
	volumePod := create(volumePodManifest, "features")
	livenessPod := create(livenessPodManifest, "features")
	readinessPod := create(fmt.Sprintf(readinessPodManifest, 20000+rand.IntN(20000)), "features-host")

	// env from a config map and a secret.
	succeeded := func(name string) {
		waitPods(t, admin, ns, "", name+" Succeeded", func(pods []v1.Pod) bool {
			for _, p := range pods {
				if p.Name == name {
					return p.Status.Phase == v1.PodSucceeded
				}
			}
			return false
		})
	}
	succeeded(envPod.Name)
	env := h.kubectl.run(t, "logs", "-n", ns, envPod.Name)
	assert.Contains(t, env, "SPECIAL_LEVEL_KEY=very\n")
	assert.Contains(t, env, "SECRET_USERNAME=backend-admin\n")

	// a configMap volume at its mountPath.
	succeeded(volumePod.Name)
	assert.Equal(t, "very\nspecial.how\nspecial.type\n", h.kubectl.run(t, "logs", "-n", ns, volumePod.Name))

	// a tcp readiness probe on a closed port: running, never Ready.
	var ready *v1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, clusterTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, readinessPod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ready = p
		return p.Status.Phase == v1.PodRunning && hasEvent(ctx, t, h, ns, readinessPod.Name, "Unhealthy", "Readiness probe failed"), nil
	})
	require.NoError(t, err, "the readiness pod runs and its probe fails: %+v", ready.Status)
	for _, c := range ready.Status.Conditions {
		if c.Type == v1.PodReady || c.Type == v1.ContainersReady {
			assert.Equal(t, v1.ConditionFalse, c.Status, c.Type)
		}
	}
	require.Len(t, ready.Status.ContainerStatuses, 1)
	assert.False(t, ready.Status.ContainerStatuses[0].Ready)
	assert.NotNil(t, ready.Status.ContainerStatuses[0].State.Running)

	// an exec liveness probe restarts its container, with the kubelet's events.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, clusterTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, livenessPod.Name, metav1.GetOptions{})
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1, nil
	})
	require.NoError(t, err, "the liveness pod's container is restarted")
	assert.True(t, eventComes(ctx, t, h, ns, livenessPod.Name, "Unhealthy", "Liveness probe failed"))
	assert.True(t, eventComes(ctx, t, h, ns, livenessPod.Name, "Killing", "Container liveness failed liveness probe, will be restarted"))
}

// eventPatience bounds how long a test waits for an event after the
// status it waited for: events go out on a recorder and client of their
// own, after the status write on a loaded machine.
const eventPatience = 30 * time.Second

// eventComes reports whether an event of pod in ns has reason and a
// message holding msg, or has one within eventPatience.
func eventComes(ctx context.Context, t *testing.T, h *harness, ns, pod, reason, msg string) bool {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, eventPatience, true, func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, t, h, ns, pod, reason, msg), nil
	})
	return err == nil
}

// hasEvent reports whether the pod has an event with reason whose message
// holds msg.
func hasEvent(ctx context.Context, t *testing.T, h *harness, ns, pod, reason, msg string) bool {
	t.Helper()
	evs, err := h.c.Admin().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return false
	}
	for _, ev := range evs.Items {
		if ev.Reason == reason && strings.Contains(ev.Message, msg) {
			return true
		}
	}
	return false
}
