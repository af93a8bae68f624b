package virtualkubelet_test

import (
	"context"
	"fmt"
	"sync"
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
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
	"github.com/podkit/podkit/podworker"
)

// The tests below run virtual-kubelet's own PodController against the
// provider and assert what the (fake) API server ends with and what the
// (simulated) backend saw.

func TestCreateRunsThePodInTheBackend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.create(newPod("web", "uid-web"))

	pod := e.waitAPI("web", "running", isRunning)
	cs := pod.Status.ContainerStatuses[0]
	assert.Equal(t, "simcloud://uid-web/app", cs.ContainerID)
	assert.True(t, cs.Ready)
	assert.NotEmpty(t, pod.Status.PodIP)
	assert.Equal(t, types.UID("uid-web"), pod.UID)

	rp := e.remote("uid-web")
	require.NotNil(t, rp)
	assert.Equal(t, vk.ContainerRunning, rp.Containers[0].State)
	assert.Equal(t, []string{"create"}, ops(e.calls("uid-web", simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove)))

	got, err := e.provider.GetPod(e.ctx, testNS, "web")
	require.NoError(t, err)
	assert.Equal(t, v1.PodRunning, got.Status.Phase)
}

func TestUpdateChangesTheImageInTheBackend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.create(newPod("web", "uid-web"))
	pod := e.waitAPI("web", "running", isRunning)

	pod.Spec.Containers[0].Image = "nginx:2"
	_, err := e.client.CoreV1().Pods(testNS).Update(e.ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	pod = e.waitAPI("web", "running nginx:2", func(p *v1.Pod) bool {
		return isRunning(p) && p.Status.ContainerStatuses[0].Image == "nginx:2"
	})
	assert.EqualValues(t, 1, pod.Status.ContainerStatuses[0].RestartCount)

	// A label change reaches the provider (virtual-kubelet calls UpdatePod)
	// but needs nothing from the backend.
	pod.Labels = map[string]string{"tier": "front"}
	_, err = e.client.CoreV1().Pods(testNS).Update(e.ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.eventually("the provider to see the label", func() bool {
		got, err := e.provider.GetPod(e.ctx, testNS, "web")
		return err == nil && got.Labels["tier"] == "front"
	})
	syncs := len(e.calls("uid-web", simcloud.OpStatus))
	e.eventually("two more syncs", func() bool { return len(e.calls("uid-web", simcloud.OpStatus)) >= syncs+2 })

	updates := succeeded(e.calls("uid-web", simcloud.OpUpdate))
	require.Len(t, updates, 1)
	assert.Equal(t, "nginx:2", updates[0].Image)
	assert.Equal(t, []string{"create", "update"}, ops(e.calls("uid-web", simcloud.OpCreate, simcloud.OpUpdate, simcloud.OpStop)))
}

func TestDeleteWithGraceStopsThenReleasesThenTheAPIObjectGoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.create(newPod("web", "uid-web"))
	e.waitAPI("web", "running", isRunning)

	e.delete("web", 2)
	// The final status reaches the API server while the object still exists
	// (virtual-kubelet removes it only when the grace period has passed).
	pod := e.waitAPI("web", "terminal", func(p *v1.Pod) bool { return p == nil || isTerminal(p) })
	require.NotNil(t, pod, "the API object went before the final status reached it")
	assert.NotNil(t, pod.DeletionTimestamp)
	assert.Equal(t, v1.PodSucceeded, pod.Status.Phase)
	term := pod.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term)
	assert.EqualValues(t, 0, term.ExitCode)

	e.eventually("the backend to release the pod", func() bool { return e.remote("uid-web") == nil })
	e.waitAPI("web", "removed", isAbsent)
	e.waitForgotten("uid-web")
	assert.Equal(t, []string{"create", "stop(2s)", "remove"},
		ops(succeeded(e.calls("uid-web", simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove))))
}

func TestForceDeleteStopsWithOneSecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.create(newPod("web", "uid-web"))
	e.waitAPI("web", "running", isRunning)

	// Grace 0: the API object goes at once, and virtual-kubelet calls
	// DeletePod with the provider's own copy (no deletion timestamp).
	e.delete("web", 0)
	e.eventually("the backend to release the pod", func() bool { return e.remote("uid-web") == nil })
	e.waitForgotten("uid-web")
	assert.Nil(t, e.apiPod("web"))
	assert.Equal(t, []string{"create", "stop(1s)", "remove"},
		ops(succeeded(e.calls("uid-web", simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove))))
}

func TestSameNameRecreatedDuringGraceIsAnotherPod(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.create(newPod("web", "uid-a"))
	e.waitAPI("web", "running", isRunning)

	// Stopping A hangs in the backend, so A stays terminating.
	resumeA := e.cloud.Pause("uid-a", simcloud.OpStop)
	defer resumeA()
	e.delete("web", 30)
	e.waitStage("uid-a", "terminating", func(i podworker.PodInfo, _ bool) bool { return i.Stage >= podworker.StageTerminating })
	// Terminating is published before the hook calls the backend; a force
	// deletion that came first would give the first stop 1s.
	e.eventually("A's 30s stop to hang in the backend", func() bool {
		for _, c := range e.cloud.Held(simcloud.OpStop) {
			if c.UID == "uid-a" && c.Grace == 30*time.Second {
				return true
			}
		}
		return false
	})

	// The user force-deletes A and creates B under the same name.
	e.delete("web", 0)
	e.waitAPI("web", "A removed", isAbsent)
	e.create(newPod("web", "uid-b"))

	pod := e.waitAPI("web", "B running", isRunning)
	assert.Equal(t, types.UID("uid-b"), pod.UID)
	assert.Equal(t, "simcloud://uid-b/app", pod.Status.ContainerStatuses[0].ContainerID)
	// A's API object is gone, so its grace period is over: it shortens to
	// 1s (and only shortens), cancelling the hung 30s stop.
	e.waitStage("uid-a", "grace 1", func(i podworker.PodInfo, _ bool) bool { return i.GracePeriod == 1 })
	require.NotNil(t, e.remote("uid-a"), "A must still be in the backend: its stop hangs")
	assert.True(t, e.remote("uid-a").Running())
	got, err := e.provider.GetPod(e.ctx, testNS, "web")
	require.NoError(t, err)
	assert.Equal(t, types.UID("uid-b"), got.UID)

	resumeA()
	e.eventually("A to be released", func() bool { return e.remote("uid-a") == nil })
	e.waitForgotten("uid-a")

	// B is untouched: running, with its own status (A's final status was
	// never written onto it).
	pod = e.apiPod("web")
	require.True(t, isRunning(pod))
	assert.Equal(t, types.UID("uid-b"), pod.UID)
	assert.Equal(t, "simcloud://uid-b/app", pod.Status.ContainerStatuses[0].ContainerID)
	assert.True(t, e.remote("uid-b").Running())
	assert.Equal(t, []string{"create"}, ops(e.calls("uid-b", simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove)))

	stops := e.calls("uid-a", simcloud.OpStop)
	require.NotEmpty(t, stops)
	assert.Equal(t, 30*time.Second, stops[0].Grace, "the first stop had the deletion's grace")
	assert.ErrorIs(t, stops[0].Err, context.Canceled, "shortening the grace cancelled the hung stop")
	for i := 1; i < len(stops); i++ {
		assert.LessOrEqual(t, stops[i].Grace, stops[i-1].Grace, "grace periods only shorten")
	}
	assert.Equal(t, []string{"stop(1s)", "remove"}, ops(succeeded(e.calls("uid-a", simcloud.OpStop, simcloud.OpRemove))))
}

func TestBackendFailuresAndRecovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{cloud: simcloud.Options{FailureRate: 1, Seed: 7}})
	e.create(newPod("web", "uid-web"))

	// Every call fails: the pod stays pending while the engine retries
	// (virtual-kubelet's calls to the provider never fail).
	e.eventually("three failed calls", func() bool { return len(e.calls("uid-web")) >= 3 })
	assert.Empty(t, e.cloud.Pods())
	assert.False(t, isRunning(e.apiPod("web")))

	e.cloud.SetFailureRate(0)
	e.waitAPI("web", "running after recovery", isRunning)
	assert.Len(t, succeeded(e.calls("uid-web", simcloud.OpCreate)), 1)

	// Failing again while the pod is deleted: virtual-kubelet removes the
	// API object once the grace period is over, stopped or not; the
	// engine's worker, keyed by UID, keeps trying.
	e.cloud.SetFailureRate(1)
	e.delete("web", 1)
	e.waitAPI("web", "removed by virtual-kubelet", isAbsent)
	rp := e.remote("uid-web")
	require.NotNil(t, rp)
	assert.True(t, rp.Running(), "nothing could stop it yet")

	e.cloud.SetFailureRate(0)
	e.eventually("the backend to release the pod", func() bool { return e.remote("uid-web") == nil })
	e.waitForgotten("uid-web")
	assert.Equal(t, []string{"create", "stop(1s)", "remove"},
		ops(succeeded(e.calls("uid-web", simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove))))
}

func TestPodThatFinishesReleasesItsResourcesAndKeepsItsAPIObject(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	for _, name := range []string{"ok", "bad"} {
		pod := newPod(name, types.UID("uid-"+name))
		pod.Spec.RestartPolicy = v1.RestartPolicyNever
		e.create(pod)
		e.waitAPI(name, "running", isRunning)
	}
	require.NoError(t, e.cloud.Exit("uid-ok", 0))
	require.NoError(t, e.cloud.Exit("uid-bad", 3))

	for name, phase := range map[string]v1.PodPhase{"ok": v1.PodSucceeded, "bad": v1.PodFailed} {
		uid := types.UID("uid-" + name)
		pod := e.waitAPI(name, "terminal", isTerminal)
		assert.Equal(t, phase, pod.Status.Phase, name)
		e.eventually(name+" released from the backend", func() bool { return e.remote(uid) == nil })
		info := e.waitStage(uid, "finished", func(i podworker.PodInfo, _ bool) bool { return i.Finished })
		assert.False(t, info.Deleted)
	}
	// Several housekeeping passes later the finished workers and the API
	// objects are still there: the API objects still exist.
	lists := len(e.cloud.Calls(simcloud.OpList))
	e.eventually("three housekeeping passes", func() bool { return len(e.cloud.Calls(simcloud.OpList)) >= lists+3 })
	for _, name := range []string{"ok", "bad"} {
		pod := e.apiPod(name)
		require.NotNil(t, pod)
		assert.Nil(t, pod.DeletionTimestamp)
		_, ok := e.provider.PodWorkers().Pod(pod.UID)
		assert.True(t, ok, "a finished pod whose API object remains is kept")
		got, err := e.provider.GetPod(e.ctx, testNS, name)
		require.NoError(t, err)
		assert.Equal(t, pod.Status.Phase, got.Status.Phase)
	}
	assert.Equal(t, []string{"create", "remove"}, ops(succeeded(e.calls("uid-bad", simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove))))
	assert.EqualValues(t, 3, e.apiPod("bad").Status.ContainerStatuses[0].State.Terminated.ExitCode)
}

func TestOrphansInTheBackendAreStoppedWithRetriesAndSurvivorsAdopted(t *testing.T) {
	t.Parallel()
	app := []vk.RemoteContainer{{Name: "app", Image: "nginx:1", State: vk.ContainerRunning, StartedAt: time.Now()}}
	e := newEnv(t, envOptions{before: func(e *env) {
		// Left over from an earlier run: one pod the API server still has
		// (same UID), one it does not.
		e.cloud.Inject(vk.RemotePod{UID: "uid-kept", Namespace: testNS, Name: "kept", Containers: app, CreatedAt: time.Now()})
		e.cloud.Inject(vk.RemotePod{UID: "uid-ghost", Namespace: testNS, Name: "ghost", Containers: app, CreatedAt: time.Now()})
		e.cloud.InjectError(simcloud.OpStop, "uid-ghost", 2)
		e.create(newPod("kept", "uid-kept"))
	}})

	// The sync loop's housekeeping kills it as the kubelet kills a runtime
	// pod no config wants (lifecycle.KillRuntimeOrphans): with a grace
	// period of 1 second, while its stop fails and is retried.
	info := e.waitStage("uid-ghost", "killed as an orphan", func(i podworker.PodInfo, ok bool) bool { return ok && i.RuntimeOnly })
	assert.Equal(t, int64(1), info.GracePeriod)
	assert.True(t, info.Deleted)
	e.eventually("the ghost to be stopped and removed", func() bool { return e.remote("uid-ghost") == nil })
	stops := e.calls("uid-ghost", simcloud.OpStop)
	require.GreaterOrEqual(t, len(stops), 3)
	assert.ErrorIs(t, stops[0].Err, simcloud.ErrUnavailable)
	assert.ErrorIs(t, stops[1].Err, simcloud.ErrUnavailable)
	assert.Equal(t, []string{"stop(1s)", "remove"}, ops(succeeded(e.calls("uid-ghost", simcloud.OpStop, simcloud.OpRemove))))
	e.waitForgotten("uid-ghost")

	// The survivor is adopted, not created again.
	pod := e.waitAPI("kept", "running", isRunning)
	assert.Equal(t, "simcloud://uid-kept/app", pod.Status.ContainerStatuses[0].ContainerID)
	assert.Empty(t, e.calls("uid-kept", simcloud.OpCreate))

	// A pod that appears in the backend later (a create that was believed
	// to have failed) is found by housekeeping.
	e.cloud.Inject(vk.RemotePod{UID: "uid-late", Namespace: testNS, Name: "late", Containers: app, CreatedAt: time.Now()})
	e.eventually("the late orphan to be removed", func() bool { return e.remote("uid-late") == nil })
	assert.Equal(t, []string{"stop(1s)", "remove"}, ops(succeeded(e.calls("uid-late", simcloud.OpStop, simcloud.OpRemove))))
	assert.True(t, e.remote("uid-kept").Running())
}

func TestFinalStatusIsResentUntilTheAPIServerHasIt(t *testing.T) {
	t.Parallel()
	// The API server rejects the terminal status 25 times: more than
	// virtual-kubelet's queue retries (20) before it drops the update.
	var rejected atomic.Int32
	e := newEnv(t, envOptions{
		informerResync: time.Second, // the informers' minimum
		reactors: func(c *fake.Clientset) {
			c.PrependReactor("update", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
				ua := a.(ktesting.UpdateAction)
				pod := ua.GetObject().(*v1.Pod)
				if ua.GetSubresource() == "status" && isTerminal(pod) && rejected.Add(1) <= 25 {
					return true, nil, apierrors.NewServiceUnavailable("status writes are down")
				}
				return false, nil, nil
			})
		},
	})
	pod := newPod("job", "uid-job")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	e.create(pod)
	e.waitAPI("job", "running", isRunning)
	require.NoError(t, e.cloud.Exit("uid-job", 0))

	got := e.waitAPI("job", "succeeded", isTerminal)
	assert.Equal(t, v1.PodSucceeded, got.Status.Phase)
	assert.Greater(t, rejected.Load(), int32(25))
}

func TestHundredPodsConcurrently(t *testing.T) {
	t.Parallel()
	const n = 100
	e := newEnv(t, envOptions{
		cloud: simcloud.Options{Latency: 2 * time.Millisecond, FailureRate: 0.1, Seed: 42},
		// Statuses come from the syncs that create and stop the pods; a
		// slower resync keeps the backend's call log (and the test) small.
		provider: vk.Options{ResyncInterval: time.Second},
		poll:     50 * time.Millisecond,
	})
	name := func(i int) string { return fmt.Sprintf("pod-%03d", i) }
	uid := func(i int) types.UID { return types.UID(fmt.Sprintf("uid-%03d", i)) }

	parallel := func(f func(i int)) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { f(i) })
		}
		wg.Wait()
	}
	start := time.Now()
	parallel(func(i int) {
		_, err := e.client.CoreV1().Pods(testNS).Create(e.ctx, newPod(name(i), uid(i)), metav1.CreateOptions{})
		assert.NoError(t, err)
	})
	e.eventually("all pods running in the API server", func() bool {
		list, err := e.client.CoreV1().Pods(testNS).List(e.ctx, metav1.ListOptions{})
		require.NoError(t, err)
		running := 0
		for i := range list.Items {
			if isRunning(&list.Items[i]) {
				running++
			}
		}
		return running == n
	})
	require.Len(t, e.cloud.Pods(), n)
	t.Logf("all running after %v", time.Since(start))

	one := int64(1)
	parallel(func(i int) {
		err := e.client.CoreV1().Pods(testNS).Delete(e.ctx, name(i), metav1.DeleteOptions{GracePeriodSeconds: &one})
		assert.NoError(t, err)
	})
	e.eventually("the API server to be empty", func() bool {
		list, err := e.client.CoreV1().Pods(testNS).List(e.ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(list.Items) == 0
	})
	e.eventually("the backend to be empty", func() bool { return len(e.cloud.Pods()) == 0 })
	e.eventually("the engine to forget every pod", func() bool { return len(e.provider.PodWorkers().Pods()) == 0 })
	t.Logf("all gone after %v; %d backend calls", time.Since(start), len(e.cloud.Calls()))

	failed := 0
	for i := range n {
		all := e.calls(uid(i))
		for _, c := range all {
			if c.Err != nil {
				failed++
			}
		}
		assert.Equal(t, []string{"create", "stop(1s)", "remove"},
			ops(succeeded(e.calls(uid(i), simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove))), name(i))
	}
	assert.Positive(t, failed, "the cloud was meant to fail now and then")
	t.Logf("%d injected backend failures were retried", failed)
}
