package kube_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// trapScript is a long-running container that ends on SIGTERM, noting it
// in $D/<pod>.term; it touches $D/<pod>.ready once its trap is set (a
// SIGTERM before would end it with 143 instead).
func trapScript(dir string) string {
	return fmt.Sprintf(`D=%s; trap 'echo term > $D/$POD_NAME.term; exit 0' TERM; touch $D/$POD_NAME.ready; while true; do sleep 0.2; done`, dir)
}

// waitReadyFiles waits until each pod's script has set its trap.
func waitReadyFiles(t *testing.T, dir string, pods []v1.Pod) {
	t.Helper()
	for _, p := range pods {
		waitForFile(t, filepath.Join(dir, p.Name+".ready"))
	}
}

// requireTerminated fails t unless each pod's script noted a SIGTERM: it
// was stopped gracefully.
func requireTerminated(t *testing.T, dir string, pods []v1.Pod) {
	t.Helper()
	for _, p := range pods {
		assert.Equal(t, []string{"term"}, lines(t, filepath.Join(dir, p.Name+".term")), "pod %s got SIGTERM and ended", p.Name)
	}
}

func deployment(ns, name, pool string, replicas int32, spec v1.PodSpec) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       inPool(spec, pool),
			},
		},
	}
}

// testDeployment: 6 replicas spread over the 3 nodes of the pool, all
// running; scaled down to 2, the others stop gracefully; a rolling update
// replaces those 2, as kubectl rollout status sees it.
func testDeployment(t *testing.T, h *harness) {
	nodes := h.hostFilesPool(t, "deploy", 3)
	ns := h.namespace(t, "deploy")
	admin := h.c.Admin()
	dir := t.TempDir()
	_, err := admin.AppsV1().Deployments(ns).Create(testContextFor(t, clusterTimeout),
		deployment(ns, "web", "deploy", 6, scriptSpec(trapScript(dir))), metav1.CreateOptions{})
	require.NoError(t, err)

	var six []v1.Pod
	if !t.Run("Spread", func(t *testing.T) {
		six = live(waitPods(t, admin, ns, "app=web", "6 Running", allRunning(6)))
		assert.Equal(t, names(nodes), nodesOf(six), "the replicas are spread over every node of the pool")
		requireProcesses(t, six)
		waitReadyFiles(t, dir, six)
	}) {
		return
	}

	var two []v1.Pod
	if !t.Run("ScaleDown", func(t *testing.T) {
		h.kubectl.run(t, "scale", "-n", ns, "deployment/web", "--replicas=2")
		two = waitPods(t, admin, ns, "app=web", "2 Running and nothing else", func(pods []v1.Pod) bool {
			return len(pods) == 2 && allRunning(2)(pods)
		})
		var gone []v1.Pod
		for _, p := range six {
			if !slicesContainsUID(two, p) {
				gone = append(gone, p)
			}
		}
		require.Len(t, gone, 4)
		waitGone(t, admin, ns, uidsOfPods(gone)...)
		requireTerminated(t, dir, gone)
		requireProcesses(t, two)
	}) {
		return
	}

	t.Run("RollingUpdate", func(t *testing.T) {
		h.kubectl.run(t, "set", "env", "-n", ns, "deployment/web", "VERSION=2")
		out := h.kubectl.run(t, "rollout", "status", "-n", ns, "deployment/web", "--timeout=2m")
		assert.Contains(t, out, `deployment "web" successfully rolled out`)
		updated := waitPods(t, admin, ns, "app=web", "2 updated pods Running and nothing else", func(pods []v1.Pod) bool {
			if len(pods) != 2 || !allRunning(2)(pods) {
				return false
			}
			for _, p := range pods {
				if slicesContainsUID(two, p) {
					return false
				}
			}
			return true
		})
		for _, p := range updated {
			assert.Contains(t, p.Spec.Containers[0].Env, v1.EnvVar{Name: "VERSION", Value: "2"})
		}
		requireProcesses(t, updated)
		waitGone(t, admin, ns, uidsOfPods(two)...)
		requireTerminated(t, dir, two)
	})
}

// slicesContainsUID says whether pods holds a pod of p's UID.
func slicesContainsUID(pods []v1.Pod, p v1.Pod) bool {
	for _, q := range pods {
		if q.UID == p.UID {
			return true
		}
	}
	return false
}

// testJob: a Job of 4 completions, 2 at a time, completes; its pods
// succeeded, nothing of them runs, and kubectl logs reads what one wrote.
func testJob(t *testing.T, h *harness) {
	h.pool(t, "job", 2)
	ns := h.namespace(t, "job")
	admin := h.c.Admin()
	spec := inPool(scriptSpec(`echo "done by $POD_NAME"`), "job")
	spec.RestartPolicy = v1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: ns},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](4),
			Parallelism: ptr.To[int32](2),
			Template:    v1.PodTemplateSpec{Spec: spec},
		},
	}
	_, err := admin.BatchV1().Jobs(ns).Create(testContextFor(t, clusterTimeout), job, metav1.CreateOptions{})
	require.NoError(t, err)

	last := waitJobComplete(t, admin, ns, "batch")
	assert.Equal(t, int32(4), last.Status.Succeeded)
	assert.Zero(t, last.Status.Failed)

	pods := waitPods(t, admin, ns, "batch.kubernetes.io/job-name=batch", "4 Succeeded", func(pods []v1.Pod) bool {
		n := 0
		for _, p := range pods {
			if p.Status.Phase == v1.PodSucceeded {
				n++
			}
		}
		return n == 4
	})
	for _, p := range pods {
		assert.Empty(t, processesOf(t, p.UID), "nothing of pod %s runs", p.Name)
	}
	out := h.kubectl.run(t, "logs", "-n", ns, pods[0].Name)
	assert.Equal(t, "done by "+pods[0].Name+"\n", out)
}

// testDaemonSet: a DaemonSet for the pool's nodes runs one pod on each,
// as kubectl rollout status sees it.
func testDaemonSet(t *testing.T, h *harness) {
	nodes := h.pool(t, "ds", 3)
	ns := h.namespace(t, "ds")
	admin := h.c.Admin()
	labels := map[string]string{"app": "per-node"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "per-node", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       inPool(scriptSpec("exec sleep 3600"), "ds"),
			},
		},
	}
	_, err := admin.AppsV1().DaemonSets(ns).Create(testContextFor(t, clusterTimeout), ds, metav1.CreateOptions{})
	require.NoError(t, err)
	out := h.kubectl.run(t, "rollout", "status", "-n", ns, "daemonset/per-node", "--timeout=2m")
	assert.Contains(t, out, `daemon set "per-node" successfully rolled out`)
	pods := live(waitPods(t, admin, ns, "app=per-node", "3 Running", allRunning(3)))
	assert.Equal(t, names(nodes), nodesOf(pods), "one pod on each node")
	requireProcesses(t, pods)
	var where []string
	for _, p := range pods {
		where = append(where, p.Spec.NodeName)
	}
	assert.Len(t, where, 3, "exactly one per node: %s", strings.Join(where, ","))
}
