package kube_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/hollowruntime"
	"github.com/podkit/podkit/podworker"
)

// testHollowAgentPodLifecycle: an agent over the hollow runtime
// (agent.RuntimeHollow) runs a pod to Running and through a graceful
// delete with the same status writes as over the process runtime: the
// API server shows each container's state (one scripted to exit 0 by its
// annotation, one running until stopped), an address of the node's pod
// range, and the final status (the SIGTERM exit) before the pod is
// removed; no process of the pod ever runs.
func testHollowAgentPodLifecycle(t *testing.T, c *cluster) {
	const node = "hollow-node"
	cfg := nodeAgentConfig(t, c, node, t.TempDir(), "")
	cfg.Runtime = agent.RuntimeHollow
	cfg.PodCIDR = nextTestPodCIDR()
	a := runAgent(t, cfg)

	pod := apiPod("hollow", node, "sleep", "3600")
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "done", Image: "none", Command: []string{"true"}})
	pod.Annotations = map[string]string{hollowruntime.AnnotationPrefix + "done": "exit=0"}
	w := watchPod(t, c, pod.Name)
	pod = createPod(t, c, pod)

	running := waitForPod(t, c.admin, "default", pod.Name, "Running with main ready and done exited 0", func(p *v1.Pod) bool {
		if p == nil || p.Status.Phase != v1.PodRunning {
			return false
		}
		main, done := statusOf(p, "main"), statusOf(p, "done")
		return main != nil && main.State.Running != nil && main.Ready &&
			done != nil && done.State.Terminated != nil && done.State.Terminated.ExitCode == 0
	})
	assert.True(t, strings.HasPrefix(statusOf(running, "main").ContainerID, "hollow://"), "a hollow container's ID: %q", statusOf(running, "main").ContainerID)
	require.NotEmpty(t, running.Status.PodIP, "an address of the node's pod range")
	ip, err := netip.ParseAddr(running.Status.PodIP)
	require.NoError(t, err)
	assert.True(t, cfg.PodCIDR.Contains(ip), "pod IP %s in %v", ip, cfg.PodCIDR)
	assert.Empty(t, processesOf(t, pod.UID), "a hollow pod runs no process")

	require.NoError(t, c.admin.CoreV1().Pods("default").Delete(testContext(t), pod.Name, metav1.DeleteOptions{}))
	var last *v1.Pod
	_, err = watchtools.UntilWithoutRetry(testContext(t), w, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*v1.Pod)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			return true, nil
		}
		last = p
		return false, nil
	})
	require.NoError(t, err)
	require.NotNil(t, last)
	assert.NotNil(t, last.DeletionTimestamp, "the deletion was graceful")
	main := statusOf(last, "main")
	require.NotNil(t, main)
	require.NotNil(t, main.State.Terminated, "the final status was written before the pod was removed: %v", main.State)
	assert.Equal(t, int32(143), main.State.Terminated.ExitCode, "main ended on SIGTERM")
	a.waitWorker(t, pod.UID, "forgotten or finished", func(info podworker.PodInfo, ok bool) bool { return !ok || info.Finished })
	assert.Empty(t, processesOf(t, pod.UID), "a hollow pod runs no process")
}

// containerStatus returns the status of pod's regular container name, nil
// when there is none.
func statusOf(pod *v1.Pod, name string) *v1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}
