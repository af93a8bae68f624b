package kube_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/podkit/podkit/examples/kube/statuswriter"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// scriptedPod is a pod whose runtime the test plays by hand: its status,
// when SyncPod reports it terminal, and when its containers stop.
type scriptedPod struct {
	mu     sync.Mutex
	status v1.PodStatus
	// terminal makes SyncPod report the pod finished once closed.
	terminal chan struct{}
	// stop lets SyncTerminatingPod return once closed.
	stop chan struct{}
	// stopped is set just before SyncTerminatingPod returns.
	stopped atomic.Bool
	// unknown makes the status function fail: the runtime cannot say.
	unknown atomic.Bool
}

func newScriptedPod() *scriptedPod {
	return &scriptedPod{terminal: make(chan struct{}), stop: make(chan struct{})}
}

func (s *scriptedPod) setStatus(st v1.PodStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = st
}

// scriptedRuntime dispatches the hooks to the scriptedPod of each UID.
type scriptedRuntime struct {
	mu   sync.Mutex
	pods map[types.UID]*scriptedPod
}

func (r *scriptedRuntime) pod(uid types.UID) *scriptedPod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods[uid]
}

func (r *scriptedRuntime) syncer() podworker.PodSyncer[struct{}] {
	return podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(_ context.Context, _ podworker.UpdateType, pod, _ *v1.Pod, _ struct{}) (bool, error) {
			select {
			case <-r.pod(pod.UID).terminal:
				return true, nil
			default:
				return false, nil
			}
		},
		SyncTerminatingPodFunc: func(ctx context.Context, pod *v1.Pod, _ struct{}, _ int64, _ func(*v1.PodStatus)) error {
			p := r.pod(pod.UID)
			select {
			case <-p.stop:
				p.stopped.Store(true)
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	}
}

func (r *scriptedRuntime) status(_ context.Context, pod *v1.Pod) (v1.PodStatus, error) {
	p := r.pod(pod.UID)
	if p.unknown.Load() {
		return v1.PodStatus{}, errors.New("the scripted runtime does not know the pod's status")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return *p.status.DeepCopy(), nil
}

func runningStatus(node string) v1.PodStatus {
	now := metav1.Now()
	return v1.PodStatus{
		Phase:      v1.PodRunning,
		Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now}},
		HostIP:     "127.0.0.1",
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "main", Image: "none", Ready: true, ContainerID: "process://1",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		}},
	}
}

func exitedStatus(phase v1.PodPhase) v1.PodStatus {
	now := metav1.Now()
	return v1.PodStatus{
		Phase:      phase,
		Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now}},
		HostIP:     "127.0.0.1",
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "main", Image: "none", ContainerID: "process://1",
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
		}},
	}
}

func condition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// testStatusWriter drives statuswriter.Writer and statuswriter.WrapSyncer with the
// real pod workers over a scripted runtime, as the node itself.
func testStatusWriter(t *testing.T, c *cluster) {
	const node = "writer-node"
	ctx := testContext(t)
	c.registerNode(t, node)
	cs := c.nodeClient(t, node)
	pods := c.admin.CoreV1().Pods("default")

	rt := &scriptedRuntime{pods: map[types.UID]*scriptedPod{}}
	writer, err := statuswriter.New(cs.CoreV1(), statuswriter.Options{})
	require.NoError(t, err)
	workers, err := podworker.New(statuswriter.WrapSyncer(rt.syncer(), writer, rt.status), podworker.Options[struct{}]{})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); assert.NoError(t, workers.Run(runCtx)) }()
	go func() { defer wg.Done(); assert.NoError(t, writer.Run(runCtx, workers)) }()
	t.Cleanup(func() { stop(); wg.Wait() })

	// start creates an API pod for the node (with a condition the agent
	// does not own), hands it to the workers as the API source would, and
	// returns it with its script.
	start := func(name string) (*v1.Pod, *scriptedPod) {
		created, err := pods.Create(ctx, apiPod(name, node, "/bin/true"), metav1.CreateOptions{})
		require.NoError(t, err)
		created, err = pods.Patch(ctx, name, types.StrategicMergePatchType,
			[]byte(`{"status":{"conditions":[{"type":"example.com/Foreign","status":"True"}]}}`), metav1.PatchOptions{}, "status")
		require.NoError(t, err)
		script := newScriptedPod()
		script.setStatus(runningStatus(node))
		rt.mu.Lock()
		rt.pods[created.UID] = script
		rt.mu.Unlock()
		desired := created.DeepCopy()
		desired.Annotations = map[string]string{mirror.ConfigSourceAnnotationKey: mirror.ApiserverSource}
		require.NoError(t, workers.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: desired}))
		return desired, script
	}

	t.Run("a pod's status follows its runtime, terminal phase last", func(t *testing.T) {
		pod, script := start("writer-runs")
		got := waitForPod(t, c.admin, "default", pod.Name, "Running", func(p *v1.Pod) bool {
			return p != nil && p.Status.Phase == v1.PodRunning
		})
		assert.NotNil(t, condition(got, "example.com/Foreign"), "a condition the agent does not own is kept")
		assert.Equal(t, v1.ConditionTrue, condition(got, v1.PodReady).Status)

		// The runtime says the pod succeeded, but its containers are not
		// known stopped yet: the containers' exit is written, the phase is
		// not.
		script.setStatus(exitedStatus(v1.PodSucceeded))
		close(script.terminal)
		require.NoError(t, workers.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodSync, Pod: pod}))
		got = waitForPod(t, c.admin, "default", pod.Name, "container exit written", func(p *v1.Pod) bool {
			return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
		})
		assert.Equal(t, v1.PodRunning, got.Status.Phase, "the terminal phase is withheld while containers may run")
		assert.True(t, workers.CouldHaveRunningContainers(pod.UID))

		close(script.stop)
		got = waitForPod(t, c.admin, "default", pod.Name, "Succeeded", func(p *v1.Pod) bool {
			return p != nil && p.Status.Phase == v1.PodSucceeded
		})
		assert.NotNil(t, condition(got, "example.com/Foreign"))
		assert.Nil(t, got.DeletionTimestamp, "a pod that was not deleted stays")
	})

	t.Run("a finished pod leaves the API server only with a terminal phase", func(t *testing.T) {
		pod, script := start("writer-unknown")
		waitForPod(t, c.admin, "default", pod.Name, "Running", isPhase(v1.PodRunning))
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String()})
		require.NoError(t, err)
		defer w.Stop()

		// From now on the runtime cannot say what the pod's status is; the
		// last one recorded says Running.
		script.unknown.Store(true)
		require.NoError(t, pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}))
		deleting, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		desired := deleting.DeepCopy()
		desired.Annotations = pod.Annotations
		require.NoError(t, workers.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: desired}))
		close(script.stop)
		_, err = watchtools.UntilWithoutRetry(ctx, w, func(ev watch.Event) (bool, error) {
			if ev.Type != watch.Deleted {
				return false, nil
			}
			assert.Equal(t, v1.PodFailed, ev.Object.(*v1.Pod).Status.Phase, "a pod whose containers stopped is written Failed before it is removed")
			return true, nil
		})
		require.NoError(t, err)
	})

	t.Run("a deleted pod is removed once finished", func(t *testing.T) {
		pod, script := start("writer-deleted")
		waitForPod(t, c.admin, "default", pod.Name, "Running", func(p *v1.Pod) bool {
			return p != nil && p.Status.Phase == v1.PodRunning
		})
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String()})
		require.NoError(t, err)
		defer w.Stop()

		require.NoError(t, pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}))
		deleting, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		require.NoError(t, err, "a running pod's deletion is graceful")
		require.NotNil(t, deleting.DeletionTimestamp)
		desired := deleting.DeepCopy()
		desired.Annotations = pod.Annotations
		require.NoError(t, workers.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: desired}))

		script.setStatus(exitedStatus(v1.PodFailed))
		close(script.stop)
		_, err = watchtools.UntilWithoutRetry(ctx, w, func(ev watch.Event) (bool, error) {
			if ev.Type != watch.Deleted {
				return false, nil
			}
			assert.True(t, script.stopped.Load(), "the pod left the API server only after its containers stopped")
			assert.Equal(t, v1.PodFailed, ev.Object.(*v1.Pod).Status.Phase, "the final status was written first")
			return true, nil
		})
		require.NoError(t, err)
	})
}

// flakyPods answers the status writer the way a busy API server can: the
// first reads hang until their context ends, the first status patches are
// refused with a Conflict (another writer changed the pod in between: it
// adds a condition of its own) and the next hang, before the calls go
// through.
type flakyPods struct {
	corev1client.PodInterface
	f *flakiness
}

type flakiness struct {
	mu                                   sync.Mutex
	getHangs, patchConflicts, patchHangs int
	// hung is how long each hung call waited until its context ended (-1
	// for a context without a deadline).
	hung []time.Duration
	// landed is closed once a status patch went through.
	landed chan struct{}
}

// hang waits until ctx ends and notes how long that took.
func (f *flakiness) hang(ctx context.Context) error {
	start := time.Now()
	_, ok := ctx.Deadline()
	<-ctx.Done()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !ok {
		f.hung = append(f.hung, -1)
	} else {
		f.hung = append(f.hung, time.Since(start))
	}
	return ctx.Err()
}

// take consumes one of *n, if any is left.
func (f *flakiness) take(n *int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *n == 0 {
		return false
	}
	*n--
	return true
}

func (p flakyPods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error) {
	if p.f.take(&p.f.getHangs) {
		return nil, p.f.hang(ctx)
	}
	return p.PodInterface.Get(ctx, name, opts)
}

func (p flakyPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error) {
	switch {
	case p.f.take(&p.f.patchConflicts):
		_, err := p.PodInterface.Patch(ctx, name, types.StrategicMergePatchType,
			[]byte(`{"status":{"conditions":[{"type":"example.com/Other","status":"True"}]}}`), metav1.PatchOptions{}, "status")
		if err != nil {
			return nil, err
		}
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, name, errors.New("the object has been modified"))
	case p.f.take(&p.f.patchHangs):
		return nil, p.f.hang(ctx)
	}
	got, err := p.PodInterface.Patch(ctx, name, pt, data, opts, subresources...)
	if err == nil {
		p.f.mu.Lock()
		select {
		case <-p.f.landed:
		default:
			close(p.f.landed)
		}
		p.f.mu.Unlock()
	}
	return got, err
}

// TestStatusWriterRetriesFailedWrites: a pod's final status lands although
// the first reads hang until SyncTimeout, and the first patches are
// refused with a Conflict or hang; what the other writer added meanwhile
// is kept.
func TestStatusWriterRetriesFailedWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := apiPod("flaky", "node-a", "/bin/true")
		pod.UID = "uid-flaky"
		pod.Status.Phase = v1.PodPending
		real := fake.NewClientset(pod)
		f := &flakiness{getHangs: 2, patchConflicts: 3, patchHangs: 2, landed: make(chan struct{})}
		cs := interceptedClient{Interface: real, core: interceptedCore{
			CoreV1Interface: real.CoreV1(),
			pods:            func(p corev1client.PodInterface) corev1client.PodInterface { return flakyPods{PodInterface: p, f: f} },
		}}
		const syncTimeout = 5 * time.Second
		writer, err := statuswriter.New(cs.CoreV1(), statuswriter.Options{
			BackOff: 10 * time.Millisecond, MaxBackOff: time.Second, SyncTimeout: syncTimeout, ResyncInterval: -1,
		})
		require.NoError(t, err)
		// Synced workers that run nothing: the pod is known not to run, as
		// one rejected at admission.
		workers, err := podworker.New(podworker.PodSyncerFuncs[struct{}]{}, podworker.Options[struct{}]{})
		require.NoError(t, err)
		workers.SyncKnownPods(nil)
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- writer.Run(ctx, workers) }()
		t.Cleanup(func() {
			stop()
			assert.NoError(t, <-done, "the writer's Run")
		})

		status := exitedStatus(v1.PodFailed)
		status.ContainerStatuses[0].State.Terminated.ExitCode = 3
		status.ContainerStatuses[0].State.Terminated.Reason = "Error"
		writer.SetPodStatus(pod, status)
		select {
		case <-f.landed:
		case <-time.After(time.Hour):
			t.Fatal("the status never landed")
		}

		got, err := real.CoreV1().Pods("default").Get(context.Background(), "flaky", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, v1.PodFailed, got.Status.Phase)
		if assert.Len(t, got.Status.ContainerStatuses, 1) && assert.NotNil(t, got.Status.ContainerStatuses[0].State.Terminated) {
			assert.Equal(t, int32(3), got.Status.ContainerStatuses[0].State.Terminated.ExitCode)
		}
		assert.NotNil(t, condition(got, "example.com/Other"), "the other writer's condition is kept")
		f.mu.Lock()
		defer f.mu.Unlock()
		assert.Zero(t, f.getHangs+f.patchConflicts+f.patchHangs, "every failure was met and the write tried again")
		assert.Equal(t, []time.Duration{syncTimeout, syncTimeout, syncTimeout, syncTimeout}, f.hung,
			"each hung call was given up after SyncTimeout")
	})
}
