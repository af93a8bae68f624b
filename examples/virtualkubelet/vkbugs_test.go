package virtualkubelet_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"

	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
	"github.com/podkit/podkit/podworker"
)

// Bugs people hit with their own virtual-kubelet providers, and why they
// cannot happen on podkit's (the package doc says so too). Each drives
// virtual-kubelet's own PodController.

// TestVK867RecreatedDuringTheOldGracePeriodSurvivesIt (VK#867, #907): a
// pod deleted with a grace period stops at once; virtual-kubelet removes
// its API object as soon as its status shows nothing running, and a pod
// with the same name and spec is created at once. The new pod is created
// in the backend (GetPod does not answer its name with the old pod), runs,
// keeps its own status, and survives the moment the old pod's grace
// period runs out (when virtual-kubelet's delayed deletion of the old pod
// fires), and no stop or removal of the old pod reaches it.
func TestVK867RecreatedDuringTheOldGracePeriodSurvivesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.create(newPod("web", "uid-a"))
	e.waitAPI("web", "A running", isRunning)

	e.delete("web", 2)
	e.waitAPI("web", "A removed once stopped, before its grace ran out", isAbsent)
	e.create(newPod("web", "uid-b"))
	b := e.waitAPI("web", "B running", isRunning)
	assert.Equal(t, types.UID("uid-b"), b.UID)

	// A marker pod deleted later, with a longer grace and a stop that
	// hangs, is removed by virtual-kubelet's delayed deletion: by then
	// A's (earlier) delayed deletion has fired too.
	e.create(newPod("marker", "uid-marker"))
	e.waitAPI("marker", "running", isRunning)
	resume := e.cloud.Pause("uid-marker", simcloud.OpStop)
	defer resume()
	e.delete("marker", 3)
	e.waitAPI("marker", "removed when its grace ran out", isAbsent)

	b = e.apiPod("web")
	require.NotNil(t, b, "B survived A's grace period")
	assert.Equal(t, types.UID("uid-b"), b.UID)
	assert.Nil(t, b.DeletionTimestamp)
	assert.True(t, isRunning(b))
	assert.Equal(t, "simcloud://uid-b/app", b.Status.ContainerStatuses[0].ContainerID)
	assert.True(t, e.remote("uid-b").Running())
	assert.Equal(t, []string{"create"}, ops(e.calls("uid-b", simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove)))
}

// TestVK938RejectedStatusWritesDoNotKeepAPodRunning (VK#938): every status
// write of the pod is rejected by the API server, so its API status never
// shows it running; when it is deleted, virtual-kubelet removes the API
// object at once, without the DeletePod of a graceful deletion. The pod is
// stopped and released all the same (its API object is gone: grace 1s).
// Two ways lead there, each enough alone (breaking one keeps this test
// passing, breaking both fails it): virtual-kubelet's DeletePod with
// GetPod's copy once the object is gone, and housekeeping.
func TestVK938RejectedStatusWritesDoNotKeepAPodRunning(t *testing.T) {
	t.Parallel()
	var rejected atomic.Int32
	e := newEnv(t, envOptions{reactors: func(c *fake.Clientset) {
		c.PrependReactor("update", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
			ua := a.(ktesting.UpdateAction)
			if ua.GetSubresource() == "status" && ua.GetObject().(*v1.Pod).Name == "web" {
				rejected.Add(1)
				return true, nil, apierrors.NewInvalid(v1.SchemeGroupVersion.WithKind("Pod").GroupKind(), "web",
					field.ErrorList{field.Invalid(field.NewPath("status", "conditions"), "", "rejected by the test")})
			}
			return false, nil, nil
		})
	}})
	e.create(newPod("web", "uid-web"))
	e.eventually("web to run in the backend", func() bool { return e.remote("uid-web").Running() })
	e.eventually("a rejected status write", func() bool { return rejected.Load() > 0 })
	require.Equal(t, v1.PodPending, e.apiPod("web").Status.Phase, "the API server never saw it run")

	e.delete("web", 30)
	e.waitAPI("web", "removed", isAbsent)
	e.eventually("the backend to release the pod", func() bool { return e.remote("uid-web") == nil })
	e.waitForgotten("uid-web")
	assert.Equal(t, []string{"create", "stop(1s)", "remove"},
		ops(succeeded(e.calls("uid-web", simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove))))
}

// TestVK684GetPodStatusAfterDeletePod (VK#684): after DeletePod, the
// provider still answers GetPodStatus for the pod — running while it
// stops, its final status once stopped — and never NotFound while its API
// object exists.
func TestVK684GetPodStatusAfterDeletePod(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.create(newPod("web", "uid-web"))
	e.waitAPI("web", "running", isRunning)
	resume := e.cloud.Pause("uid-web", simcloud.OpStop)
	defer resume()

	e.delete("web", 30)
	e.waitStage("uid-web", "terminating", func(i podworker.PodInfo, _ bool) bool { return i.Stage >= podworker.StageTerminating })
	st, err := e.provider.GetPodStatus(e.ctx, testNS, "web")
	require.NoError(t, err, "answered after DeletePod, while the pod stops")
	assert.Equal(t, v1.PodRunning, st.Phase)

	resume()
	e.waitStage("uid-web", "terminated", func(i podworker.PodInfo, _ bool) bool { return i.Stage >= podworker.StageTerminated })
	st, err = e.provider.GetPodStatus(e.ctx, testNS, "web")
	if e.apiPod("web") != nil {
		require.NoError(t, err, "answered once stopped while the API object exists")
		assert.Equal(t, v1.PodSucceeded, st.Phase)
	}
	// The final status lands (virtual-kubelet removes the API object when
	// the deletion's grace runs out: its delayed removal, already queued,
	// is not brought forward).
	got := e.waitAPI("web", "the final status", func(p *v1.Pod) bool { return p == nil || isTerminal(p) })
	if got != nil {
		assert.Equal(t, v1.PodSucceeded, got.Status.Phase)
	}
}

// TestVK938DeletePodWithoutASpecStopsThePodItRuns (VK#938's second half):
// the issue reports DeletePod being handed a copy with the deletion but no
// spec. The provider takes only the deletion from it:
// the pod stops with the spec it runs with (its container reported in the
// final status, terminated, not dropped), with the deletion's grace.
func TestVK938DeletePodWithoutASpecStopsThePodItRuns(t *testing.T) {
	d := newDirect(t, false)
	var rec recorder
	d.provider.NotifyPods(d.ctx, rec.notify)
	require.NoError(t, d.provider.CreatePod(d.ctx, newPod("web", "uid-web")))
	d.eventually("the pod to run", func() bool { return d.remote("uid-web").Running() })

	bare := &v1.Pod{ObjectMeta: *newPod("web", "uid-web").ObjectMeta.DeepCopy()}
	bare.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	bare.DeletionGracePeriodSeconds = new(int64(5))
	require.NoError(t, d.provider.DeletePod(d.ctx, bare))

	d.eventually("its final status", func() bool { return rec.count("uid-web", isTerminal) == 1 })
	var final *v1.Pod
	rec.mu.Lock()
	for _, p := range rec.pods {
		if p.UID == "uid-web" && isTerminal(p) {
			final = p
		}
	}
	rec.mu.Unlock()
	require.Len(t, final.Status.ContainerStatuses, 1)
	assert.Equal(t, "app", final.Status.ContainerStatuses[0].Name)
	assert.NotNil(t, final.Status.ContainerStatuses[0].State.Terminated)
	stops := d.cloud.Calls(simcloud.OpStop)
	require.NotEmpty(t, stops)
	assert.Equal(t, 5*time.Second, stops[0].Grace)
}
