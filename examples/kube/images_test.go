package kube_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// testImages: a Deployment of an image the node knows no config of, with
// args and no command, gets exactly its replicas, each waiting in
// CreateContainerConfigError with a Failed event, never Failed and never
// replaced (no pod storm); a busybox-style Deployment (args only) runs
// sh, with the warning that the node's sh stands in for the image's.
func testImages(t *testing.T, h *harness) {
	h.pool(t, "images", 1)
	ns := h.namespace(t, "images")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)

	unknown := inPool(v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "example.com/podkit/unknown:1.0", Args: []string{"--serve"}}}}, "images")
	_, err := admin.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "unknown", "images", 2, unknown), metav1.CreateOptions{})
	require.NoError(t, err)
	busybox := inPool(v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox:1.36", Args: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"}}}}, "images")
	_, err = admin.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "busybox", "images", 1, busybox), metav1.CreateOptions{})
	require.NoError(t, err)

	waiting := func(pods []v1.Pod) bool {
		if len(pods) != 2 {
			return false
		}
		for _, p := range pods {
			if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil ||
				p.Status.ContainerStatuses[0].State.Waiting.Reason != processruntime.ReasonCreateContainerConfigError {
				return false
			}
		}
		return true
	}
	pods := waitPods(t, admin, ns, "app=unknown", "2 waiting in CreateContainerConfigError", waiting)
	assert.Contains(t, pods[0].Status.ContainerStatuses[0].State.Waiting.Message, `image "example.com/podkit/unknown:1.0" is not in this node's image table`)
	waitForEvent(t, admin, ns, string(pods[0].UID), eventMatch{typ: v1.EventTypeWarning, reason: "Failed", fieldPath: "spec.containers{app}", message: "Error: container has args but no command..."})

	// A refused or failed pod would be replaced within a second or two
	// (the storm this guards against made hundreds a minute): for a few
	// seconds of the agent's retries, the two stay, Pending, the same.
	uids := map[string]bool{string(pods[0].UID): true, string(pods[1].UID): true}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=unknown"})
		if err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			require.True(t, uids[string(p.UID)], "pod %s replaced one of the two: %s", p.Name, summarize(list.Items))
			require.Equal(t, v1.PodPending, p.Status.Phase, "pod %s", p.Name)
		}
		require.Len(t, list.Items, 2)
		return false, nil
	})
	require.ErrorIs(t, err, context.DeadlineExceeded, "the watch ran its course")

	running := waitPods(t, admin, ns, "app=busybox", "1 Running", allRunning(1))
	requireProcesses(t, running)
	waitForEvent(t, admin, ns, string(running[0].UID), eventMatch{typ: v1.EventTypeWarning, reason: processruntime.ReasonHostProgram, fieldPath: "spec.containers{main}",
		message: `image "busybox:1.36" is not pulled: this node runs its own programs, so the container's sh (...`})
}

// testSidecarJob: a Job whose pod has a sidecar (an init container with
// restartPolicy Always) completes once its main container does; the
// sidecar, started before it, is stopped after it.
func testSidecarJob(t *testing.T, h *harness) {
	h.hostFilesPool(t, "sidecar", 1)
	ns := h.namespace(t, "sidecar")
	admin := h.c.Admin()
	always := v1.ContainerRestartPolicyAlways
	dir := t.TempDir()
	// The main container runs once the sidecar started (it waits for its
	// mark, in case it starts before the sidecar wrote it), and sees it not
	// stopped yet; the sidecar notes the SIGTERM that stops it.
	spec := inPool(scriptSpec(`while [ ! -e $D/proxy.up ]; do sleep 0.05; done; [ ! -e $D/proxy.term ] && echo "proxy ran beside $POD_NAME"`), "sidecar")
	spec.Containers[0].Env = append(spec.Containers[0].Env, v1.EnvVar{Name: "D", Value: dir})
	spec.RestartPolicy = v1.RestartPolicyNever
	spec.InitContainers = []v1.Container{{
		Name: "proxy", Image: "none", RestartPolicy: &always,
		Command: []string{"/bin/sh", "-c", `trap 'touch $D/proxy.term; exit 0' TERM; touch $D/proxy.up; while true; do sleep 0.2; done`},
		Env:     []v1.EnvVar{{Name: "D", Value: dir}},
	}}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "with-sidecar", Namespace: ns},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: v1.PodTemplateSpec{Spec: spec}},
	}
	_, err := admin.BatchV1().Jobs(ns).Create(testContextFor(t, clusterTimeout), job, metav1.CreateOptions{})
	require.NoError(t, err)

	last := waitJobComplete(t, admin, ns, job.Name)
	assert.Equal(t, int32(1), last.Status.Succeeded)
	assert.Zero(t, last.Status.Failed)

	pods := waitPods(t, admin, ns, "batch.kubernetes.io/job-name="+job.Name, "1 Succeeded with its sidecar stopped", func(pods []v1.Pod) bool {
		return len(pods) == 1 && pods[0].Status.Phase == v1.PodSucceeded && len(pods[0].Status.InitContainerStatuses) == 1 &&
			pods[0].Status.InitContainerStatuses[0].State.Terminated != nil
	})
	assert.Empty(t, processesOf(t, pods[0].UID), "nothing of the pod runs")
	proxy := pods[0].Status.InitContainerStatuses[0]
	assert.False(t, proxy.Ready)
	out := h.kubectl.run(t, "logs", "-n", ns, pods[0].Name)
	assert.Equal(t, "proxy ran beside "+pods[0].Name+"\n", out)
	assert.Equal(t, "Completed", pods[0].Status.ContainerStatuses[0].State.Terminated.Reason)
	assert.FileExists(t, filepath.Join(dir, "proxy.term"), "the sidecar was stopped by SIGTERM, after the main container")
}

// waitJobComplete waits until the Job is Complete, and returns it.
func waitJobComplete(t *testing.T, cs kubernetes.Interface, ns, name string) *batchv1.Job {
	t.Helper()
	var last *batchv1.Job
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, clusterTimeout, true, func(ctx context.Context) (bool, error) {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = j
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "waiting for Job %s to complete; last status: %+v", name, last)
	return last
}
