package virtualkubelet_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
	"github.com/podkit/podkit/podworker"
)

// These tests drive the provider directly, without virtual-kubelet, for
// the paths the controller does not reach or cannot make deterministic.

// recorder is a NotifyPods callback that keeps every pod it is given.
type recorder struct {
	mu   sync.Mutex
	pods []*v1.Pod
}

func (r *recorder) notify(pod *v1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods = append(r.pods, pod)
}

// count returns how many notifications for uid satisfied cond.
func (r *recorder) count(uid types.UID, cond func(*v1.Pod) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.pods {
		if p.UID == uid && cond(p) {
			n++
		}
	}
	return n
}

type direct struct {
	t        *testing.T
	ctx      context.Context
	cloud    *simcloud.Cloud
	provider *vk.Provider
	// index is the API server as the provider's lister sees it (nil when
	// the provider has no lister).
	index cache.Indexer
}

func newDirect(t *testing.T, withLister bool) *direct {
	t.Helper()
	return newDirectOf(t, simcloud.Options{}, vk.Options{}, withLister)
}

// newDirectWith is newDirect with a lister, the given cloud and provider
// options (the fast intervals apply where opts leaves them zero).
func newDirectWith(t *testing.T, cloudOpts simcloud.Options, opts vk.Options) *direct {
	t.Helper()
	return newDirectOf(t, cloudOpts, opts, true)
}

func newDirectOf(t *testing.T, cloudOpts simcloud.Options, opts vk.Options, withLister bool) *direct {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cloud, err := simcloud.New(cloudOpts)
	require.NoError(t, err)
	d := &direct{t: t, ctx: ctx, cloud: cloud}
	setDefault(&opts.ResyncInterval, 20*time.Millisecond)
	setDefault(&opts.HousekeepingInterval, 20*time.Millisecond)
	setDefault(&opts.BackOff, 5*time.Millisecond)
	setDefault(&opts.MaxBackOff, 50*time.Millisecond)
	setDefault(&opts.NotifyRetry, 5*time.Millisecond)
	setDefault(&opts.NotifyRetryMax, 20*time.Millisecond)
	if withLister {
		d.index = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		opts.Pods = corev1listers.NewPodLister(d.index)
	}
	d.provider, err = vk.New(cloud, opts)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- d.provider.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return d
}

func (d *direct) eventually(what string, cond func() bool) {
	d.t.Helper()
	err := wait.PollUntilContextTimeout(d.ctx, 2*time.Millisecond, patience, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	require.NoError(d.t, err, "waiting for %s", what)
}

func (d *direct) waitStage(uid types.UID, cond func(podworker.PodInfo, bool) bool) podworker.PodInfo {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(d.ctx, patience)
	defer cancel()
	info, _, err := d.provider.PodWorkers().WaitFor(ctx, uid, cond)
	require.NoError(d.t, err)
	return info
}

func (d *direct) remote(uid types.UID) *vk.RemotePod {
	for _, rp := range d.cloud.Pods() {
		if rp.UID == uid {
			return &rp
		}
	}
	return nil
}

func TestNewRejectsBadInput(t *testing.T) {
	_, err := vk.New(nil, vk.Options{})
	assert.Error(t, err)
	cloud, err := simcloud.New(simcloud.Options{})
	require.NoError(t, err)
	_, err = vk.New(cloud, vk.Options{HousekeepingInterval: -1})
	assert.Error(t, err)
	_, err = vk.New(cloud, vk.Options{NotifyRetry: time.Second, NotifyRetryMax: time.Millisecond})
	assert.Error(t, err)
	_, err = vk.New(cloud, vk.Options{MaxConcurrentSyncs: -1})
	assert.Error(t, err, "the engine's own options are checked too")
}

func TestInvalidPodsAreInvalidInput(t *testing.T) {
	d := newDirect(t, false)
	noUID := newPod("x", "")
	for name, err := range map[string]error{
		"create nil":    d.provider.CreatePod(d.ctx, nil),
		"update no UID": d.provider.UpdatePod(d.ctx, noUID),
		"delete nil":    d.provider.DeletePod(d.ctx, nil),
	} {
		assert.True(t, errdefs.IsInvalidInput(err), "%s: %v", name, err)
	}
	_, err := d.provider.GetPod(d.ctx, testNS, "x")
	assert.True(t, errdefs.IsNotFound(err))
	_, err = d.provider.GetPodStatus(d.ctx, testNS, "x")
	assert.True(t, errdefs.IsNotFound(err))
}

func TestRunOnce(t *testing.T) {
	cloud, err := simcloud.New(simcloud.Options{})
	require.NoError(t, err)
	p, err := vk.New(cloud, vk.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, p.Run(ctx), "Run returns nil once ctx ends")
	assert.Error(t, p.Run(context.Background()), "a second Run is an error")
	assert.ErrorIs(t, p.CreatePod(context.Background(), newPod("x", "uid-x")), podworker.ErrStopped)
}

func TestStatusesWaitForNotifyPodsAndFinalOnesAreResentUntilTheAPIServerHasThem(t *testing.T) {
	d := newDirect(t, true)
	pod := newPod("job", "uid-job")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	require.NoError(t, d.index.Add(pod))
	require.NoError(t, d.provider.CreatePod(d.ctx, pod))
	d.eventually("the pod to run", func() bool { return d.remote("uid-job").Running() })

	// Statuses computed before NotifyPods are sent once it is called.
	var rec recorder
	d.provider.NotifyPods(d.ctx, rec.notify)
	d.eventually("the running status", func() bool { return rec.count("uid-job", isRunning) == 1 })

	// The final status is sent again and again while the API server does
	// not show it...
	require.NoError(t, d.cloud.Exit("uid-job", 0))
	d.eventually("three sends of the final status", func() bool { return rec.count("uid-job", isTerminal) >= 3 })
	// ... until it does.
	landed := pod.DeepCopy()
	landed.Status.Phase = v1.PodSucceeded
	require.NoError(t, d.index.Update(landed))
	d.waitStage("uid-job", func(i podworker.PodInfo, _ bool) bool { return i.Finished })
	assert.Nil(t, d.remote("uid-job"), "released while the API object remains")
	got, err := d.provider.GetPod(d.ctx, testNS, "job")
	require.NoError(t, err)
	assert.Equal(t, v1.PodSucceeded, got.Status.Phase)
	st, err := d.provider.GetPodStatus(d.ctx, testNS, "job")
	require.NoError(t, err, "the recorded final status, without the backend")
	assert.Equal(t, v1.PodSucceeded, st.Phase)

	// Once the API object is gone, housekeeping forgets the pod.
	require.NoError(t, d.index.Delete(landed))
	d.eventually("the pod to be forgotten", func() bool {
		_, ok := d.provider.PodWorkers().Pod("uid-job")
		return !ok
	})
	_, err = d.provider.GetPod(d.ctx, testNS, "job")
	assert.True(t, errdefs.IsNotFound(err))
}

func TestWithoutAListerAFinalStatusIsSentOnce(t *testing.T) {
	d := newDirect(t, false)
	var rec recorder
	d.provider.NotifyPods(d.ctx, rec.notify)
	pod := newPod("job", "uid-job")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	require.NoError(t, d.provider.CreatePod(d.ctx, pod))
	d.eventually("the pod to run", func() bool { return d.remote("uid-job").Running() })
	require.NoError(t, d.cloud.Exit("uid-job", 4))
	d.waitStage("uid-job", func(i podworker.PodInfo, _ bool) bool { return i.Finished })
	d.eventually("the final status", func() bool { return rec.count("uid-job", isTerminal) == 1 })
	// Several resyncs and housekeeping passes later it was not sent again.
	statuses := len(d.cloud.Calls(simcloud.OpList))
	d.eventually("three housekeeping passes", func() bool { return len(d.cloud.Calls(simcloud.OpList)) >= statuses+3 })
	assert.Equal(t, 1, rec.count("uid-job", isTerminal))
	assert.Equal(t, 1, rec.count("uid-job", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed }))
}

func TestNameReuseStopsTheOlderPodAsDeleted(t *testing.T) {
	d := newDirect(t, false)
	var rec recorder
	d.provider.NotifyPods(d.ctx, rec.notify)
	require.NoError(t, d.provider.CreatePod(d.ctx, newPod("web", "uid-a")))
	d.eventually("A to run", func() bool { return d.remote("uid-a").Running() })
	resume := d.cloud.Pause("uid-a", simcloud.OpStop)
	defer resume()

	require.NoError(t, d.provider.CreatePod(d.ctx, newPod("web", "uid-b")))
	info := d.waitStage("uid-a", func(i podworker.PodInfo, _ bool) bool { return i.Stage >= podworker.StageTerminating })
	assert.True(t, info.Deleted)
	assert.EqualValues(t, 1, info.GracePeriod)
	d.eventually("B to run", func() bool { return d.remote("uid-b").Running() })
	got, err := d.provider.GetPod(d.ctx, testNS, "web")
	require.NoError(t, err)
	assert.Equal(t, types.UID("uid-b"), got.UID)

	resume()
	d.eventually("A to be released", func() bool { return d.remote("uid-a") == nil })
	d.eventually("A to be forgotten", func() bool {
		_, ok := d.provider.PodWorkers().Pod("uid-a")
		return !ok
	})
	assert.Zero(t, rec.count("uid-a", isTerminal), "no status is sent for a pod whose API object is gone")
	assert.True(t, d.remote("uid-b").Running())
}

func TestDeletePodOfUnknownPods(t *testing.T) {
	d := newDirect(t, false)
	var rec recorder
	d.provider.NotifyPods(d.ctx, rec.notify)

	// Without a deletion timestamp: a backend-only pod, stopped and removed.
	d.cloud.Inject(vk.RemotePod{UID: "uid-ghost", Namespace: testNS, Name: "ghost",
		Containers: []vk.RemoteContainer{{Name: "app", State: vk.ContainerRunning}}})
	pods, err := d.provider.GetPods(d.ctx)
	require.NoError(t, err)
	require.Len(t, pods, 1, "GetPods lists backend pods the provider does not know")
	assert.Equal(t, types.UID("uid-ghost"), pods[0].UID)
	assert.Equal(t, v1.PodRunning, pods[0].Status.Phase)
	require.NoError(t, d.provider.DeletePod(d.ctx, pods[0]))
	d.eventually("the ghost to be removed", func() bool { return d.remote("uid-ghost") == nil })

	// With one: a pod of the API server the provider never ran. It never
	// started, so its final status says so.
	pod := newPod("late", "uid-late")
	pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pod.DeletionGracePeriodSeconds = new(int64(5))
	require.NoError(t, d.provider.DeletePod(d.ctx, pod))
	d.eventually("its final status", func() bool { return rec.count("uid-late", isTerminal) == 1 })
	d.waitStage("uid-late", func(i podworker.PodInfo, _ bool) bool { return i.Finished })
	var final *v1.Pod
	rec.mu.Lock()
	for _, p := range rec.pods {
		if p.UID == "uid-late" {
			final = p
		}
	}
	rec.mu.Unlock()
	assert.Equal(t, v1.PodFailed, final.Status.Phase)
	term := final.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term)
	assert.Equal(t, vk.ReasonContainerStatusUnknown, term.Reason)
	assert.EqualValues(t, vk.ExitCodeUnknown, term.ExitCode)
	for _, c := range d.cloud.Calls(simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove) {
		assert.NotEqual(t, types.UID("uid-late"), c.UID, "nothing to create, stop or remove: %v", c.Op)
	}
	_, err = d.provider.GetPod(d.ctx, testNS, "late")
	assert.True(t, errdefs.IsNotFound(err), "a deleted pod is hidden from GetPod")
}

func TestAPodTheBackendLosesFails(t *testing.T) {
	d := newDirect(t, false)
	var rec recorder
	d.provider.NotifyPods(d.ctx, rec.notify)
	require.NoError(t, d.provider.CreatePod(d.ctx, newPod("web", "uid-web")))
	d.eventually("the pod to run", func() bool { return rec.count("uid-web", isRunning) == 1 })
	st, err := d.provider.GetPodStatus(d.ctx, testNS, "web")
	require.NoError(t, err)
	assert.Equal(t, v1.PodRunning, st.Phase, "read from the backend")

	require.NoError(t, d.cloud.Lose("uid-web"))
	d.eventually("the final status", func() bool { return rec.count("uid-web", isTerminal) == 1 })
	d.waitStage("uid-web", func(i podworker.PodInfo, _ bool) bool { return i.Finished })
	got, err := d.provider.GetPod(d.ctx, testNS, "web")
	require.NoError(t, err)
	assert.Equal(t, v1.PodFailed, got.Status.Phase)
	term := got.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term)
	assert.Equal(t, vk.ReasonContainerStatusUnknown, term.Reason)
	assert.False(t, term.StartedAt.IsZero(), "it keeps when the container started")
	assert.Len(t, d.cloud.Calls(simcloud.OpCreate), 1, "a lost pod is not created again")
}
