package virtualkubelet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
	"github.com/podkit/podkit/podworker"
)

// listed returns the UIDs GetPods lists.
func (d *direct) listed() []types.UID {
	d.t.Helper()
	pods, err := d.provider.GetPods(d.ctx)
	require.NoError(d.t, err)
	var out []types.UID
	for _, p := range pods {
		out = append(out, p.UID)
	}
	return out
}

// deleting returns pod as the API server shows it once its deletion with
// grace seconds was requested.
func deleting(pod *v1.Pod, grace int64) *v1.Pod {
	pod = pod.DeepCopy()
	now := metav1.Now()
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, &grace
	return pod
}

// TestGetPodsListsWhatRuns: GetPods (/runningpods) lists a pod from the
// moment it is handed over while the engine's window says its containers
// may run, including while it stops; not once its containers have all
// stopped, whether it finished on its own (its API object remaining with
// its final status) or was deleted (its API object still there, in its
// grace period).
func TestGetPodsListsWhatRuns(t *testing.T) {
	d := newDirect(t, true)
	job, web := newPod("job", "uid-job"), newPod("web", "uid-web")
	job.Spec.RestartPolicy = v1.RestartPolicyNever
	for _, p := range []*v1.Pod{job, web} {
		require.NoError(t, d.index.Add(p))
		require.NoError(t, d.provider.CreatePod(d.ctx, p))
	}
	assert.Equal(t, []types.UID{"uid-job", "uid-web"}, d.listed(), "handed over: listed before they start")
	d.eventually("both to run", func() bool { return d.remote("uid-job").Running() && d.remote("uid-web").Running() })
	assert.Equal(t, []types.UID{"uid-job", "uid-web"}, d.listed())

	// The job finishes on its own; its API object stays.
	require.NoError(t, d.cloud.Exit("uid-job", 0))
	d.waitStage("uid-job", func(i podworker.PodInfo, _ bool) bool { return i.Stage >= podworker.StageTerminated })
	assert.Equal(t, []types.UID{"uid-web"}, d.listed(), "a finished pod is not listed")
	got, err := d.provider.GetPod(d.ctx, testNS, "job")
	require.NoError(t, err, "but GetPod still answers for it")
	assert.Equal(t, v1.PodSucceeded, got.Status.Phase)

	// The web pod is deleted with a long grace; its stop hangs, so it is
	// listed while it stops, and not once it stopped.
	resume := d.cloud.Pause("uid-web", simcloud.OpStop)
	defer resume()
	del := deleting(web, 30)
	require.NoError(t, d.index.Update(del))
	require.NoError(t, d.provider.DeletePod(d.ctx, del))
	d.waitStage("uid-web", func(i podworker.PodInfo, _ bool) bool { return i.Stage >= podworker.StageTerminating })
	assert.Equal(t, []types.UID{"uid-web"}, d.listed(), "listed while its containers stop")
	resume()
	d.waitStage("uid-web", func(i podworker.PodInfo, _ bool) bool { return i.Stage >= podworker.StageTerminated })
	assert.Empty(t, d.listed(), "not listed once stopped, though its API object remains in its grace period")

	// A backend pod nobody owns is listed while it runs.
	d.cloud.Inject(remoteOnly("uid-ghost", "ghost"))
	assert.Equal(t, []types.UID{"uid-ghost"}, d.listed())
}

// TestGetPodAndStatusAnswerUntilTheFinalStatusIsWritten: with the API
// server's lister, GetPod and GetPodStatus answer for a pod whose deletion
// was requested while it stops and once it stopped (its final status, not
// NotFound, which virtual-kubelet would turn into Failed), and stop
// answering when a successor holds its name in the API server.
func TestGetPodAndStatusAnswerUntilTheFinalStatusIsWritten(t *testing.T) {
	d := newDirect(t, true)
	web := newPod("web", "uid-a")
	require.NoError(t, d.index.Add(web))
	require.NoError(t, d.provider.CreatePod(d.ctx, web))
	d.eventually("A to run", func() bool { return d.remote("uid-a").Running() })

	resume := d.cloud.Pause("uid-a", simcloud.OpStop)
	defer resume()
	del := deleting(web, 30)
	require.NoError(t, d.index.Update(del))
	require.NoError(t, d.provider.DeletePod(d.ctx, del))
	d.waitStage("uid-a", func(i podworker.PodInfo, _ bool) bool { return i.Stage >= podworker.StageTerminating })
	st, err := d.provider.GetPodStatus(d.ctx, testNS, "web")
	require.NoError(t, err, "answered while it stops")
	assert.Equal(t, v1.PodRunning, st.Phase)
	got, err := d.provider.GetPod(d.ctx, testNS, "web")
	require.NoError(t, err)
	assert.NotNil(t, got.DeletionTimestamp)

	resume()
	d.waitStage("uid-a", func(i podworker.PodInfo, _ bool) bool { return i.Stage >= podworker.StageTerminated })
	st, err = d.provider.GetPodStatus(d.ctx, testNS, "web")
	require.NoError(t, err, "answered once stopped, with the final status")
	assert.Equal(t, v1.PodSucceeded, st.Phase)
	require.NotNil(t, st.ContainerStatuses[0].State.Terminated)

	// A's API object goes and B takes the name: GetPod must not answer B's
	// name with A, or virtual-kubelet would compare B with A instead of
	// creating it.
	require.NoError(t, d.index.Delete(del))
	require.NoError(t, d.index.Add(newPod("web", "uid-b")))
	_, err = d.provider.GetPod(d.ctx, testNS, "web")
	assert.True(t, errdefs.IsNotFound(err), "the name belongs to a successor: %v", err)
	_, err = d.provider.GetPodStatus(d.ctx, testNS, "web")
	assert.True(t, errdefs.IsNotFound(err), "%v", err)
}

// TestGetPodStatusReadsTheBackendWhileRunning: GetPodStatus reads the
// backend while the pod runs (a restart shows at once), and the recorded
// final status after.
func TestGetPodStatusReadsTheBackendWhileRunning(t *testing.T) {
	d := newDirect(t, true)
	web := newPod("web", "uid-web")
	require.NoError(t, d.index.Add(web))
	require.NoError(t, d.provider.CreatePod(d.ctx, web))
	d.eventually("the pod to run", func() bool { return d.remote("uid-web").Running() })
	require.NoError(t, d.cloud.Exit("uid-web", 1)) // restarted by the cloud
	before := len(d.cloud.Calls(simcloud.OpStatus))
	st, err := d.provider.GetPodStatus(d.ctx, testNS, "web")
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.ContainerStatuses[0].RestartCount)
	assert.Greater(t, len(d.cloud.Calls(simcloud.OpStatus)), before, "read from the backend")
}

// remoteOnly is a running backend pod with one container.
func remoteOnly(uid types.UID, name string) vk.RemotePod {
	return vk.RemotePod{UID: uid, Namespace: testNS, Name: name,
		Containers: []vk.RemoteContainer{{Name: "app", State: vk.ContainerRunning}}}
}
