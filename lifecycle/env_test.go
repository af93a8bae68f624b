package lifecycle_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/mirror/mirrortest"
	"github.com/podkit/podkit/podmanager"
	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// epoch is the fake clock's start.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// event is one recorded event.
type event struct {
	Object    runtime.Object
	Type      string
	Reason    string
	Message   string
	ObjectKey string
}

// events is a Recorder that keeps what it is given.
type events struct {
	mu   sync.Mutex
	list []event
}

func (e *events) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := ""
	switch o := obj.(type) {
	case *v1.Pod:
		key = mirror.PodFullName(o)
	case *v1.ObjectReference:
		key = o.Kind + "/" + o.Name
	}
	e.list = append(e.list, event{Object: obj, Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...), ObjectKey: key})
}

func (e *events) all() []event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

func (e *events) reasons() []string {
	var out []string
	for _, ev := range e.all() {
		out = append(out, ev.Reason+" "+ev.ObjectKey)
	}
	return out
}

// rejection is one OnReject call.
type rejection struct {
	UID    types.UID
	Status v1.PodStatus
}

// runtimePods is a settable RuntimePodLister.
type runtimePods struct {
	mu   sync.Mutex
	pods []podworker.RuntimePod
	err  error
}

func (r *runtimePods) set(pods ...podworker.RuntimePod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods = pods
}

func (r *runtimePods) ListRuntimePods(context.Context) ([]podworker.RuntimePod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pods), r.err
}

// env is a whole agent assembled by lifecycle.NewAgent (Config, SyncLoop,
// podmanager, the podworker engine, node shutdown) over a FakeSyncer, with
// a FakeClient for mirror pods. The test plays the sources through cfg.
// Make it inside a synctest bubble; time moves only when the test steps
// clock.
type env struct {
	t       *testing.T
	ctx     context.Context
	clock   *testingclock.FakeClock
	syncer  *podworkertest.FakeSyncer[struct{}]
	agent   *lifecycle.Agent[struct{}]
	workers *podworker.PodWorkers[struct{}]
	store   *podmanager.Manager
	mirrors *mirrortest.FakeClient
	runtime *runtimePods
	cfg     *podconfig.Config
	h       *lifecycle.SyncLoop
	events  *events

	mu       sync.Mutex
	rejected []rejection

	stop    context.CancelFunc
	runDone chan error
}

const housekeepingInterval = 2 * time.Second

func newEnv(t *testing.T, configure func(*lifecycle.SyncLoopOptions)) *env {
	t.Helper()
	return newAgentEnv(t, func(o *lifecycle.AgentOptions[struct{}]) {
		if configure != nil {
			configure(&o.SyncLoop)
		}
	})
}

// newAgentEnv is newEnv with the whole AgentOptions to configure.
func newAgentEnv(t *testing.T, configure func(*lifecycle.AgentOptions[struct{}])) *env {
	t.Helper()
	e := &env{
		t:       t,
		clock:   testingclock.NewFakeClock(epoch),
		syncer:  podworkertest.NewFakeSyncer[struct{}](),
		store:   podmanager.New(),
		mirrors: mirrortest.NewFakeClient(),
		runtime: &runtimePods{},
		events:  &events{},
	}
	e.syncer.Clock = e.clock
	opts := lifecycle.SyncLoopOptions{
		MirrorClient:         e.mirrors,
		RuntimePods:          e.runtime,
		HousekeepingInterval: housekeepingInterval,
		OnReject: func(_ context.Context, pod *v1.Pod, status v1.PodStatus) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.rejected = append(e.rejected, rejection{UID: pod.UID, Status: status})
		},
	}
	agentOpts := lifecycle.AgentOptions[struct{}]{
		SyncLoop: opts,
		Recorder: e.events,
		Clock:    e.clock,
	}
	if configure != nil {
		configure(&agentOpts)
	}
	var err error
	e.agent, err = lifecycle.NewAgent[struct{}](e.syncer, agentOpts)
	require.NoError(t, err)
	e.workers, e.store, e.cfg, e.h = e.agent.Workers(), e.agent.Store(), e.agent.Config(), e.agent.SyncLoop()
	e.ctx = t.Context()
	return e
}

// start runs the agent (and through it the sync loop and the workers)
// until the test ends.
func (e *env) start() {
	ctx, cancel := context.WithCancel(e.ctx)
	e.stop = cancel
	e.runDone = make(chan error, 1)
	go func() { e.runDone <- e.agent.Run(ctx) }()
	e.t.Cleanup(func() { e.shutdown() })
	synctest.Wait()
}

// shutdown ends Run and waits for it (and so for the workers) to return.
func (e *env) shutdown() {
	if e.stop == nil {
		return
	}
	e.stop()
	e.stop = nil
	require.NoError(e.t, <-e.runDone)
}

// set sends a full snapshot of source and waits until the agent is idle.
func (e *env) set(source string, pods ...*v1.Pod) {
	e.t.Helper()
	require.NoError(e.t, e.cfg.SetPods(e.ctx, source, pods))
	synctest.Wait()
}

// housekeep moves the clock by one housekeeping interval, so Run runs
// Housekeeping, and waits until the agent is idle.
func (e *env) housekeep() {
	e.clock.Step(housekeepingInterval)
	synctest.Wait()
}

// feedMirrors plays the API server source: it sends the mirror pods the
// FakeClient holds, each with a UID of its own, as the API source's full
// snapshot.
func (e *env) feedMirrors() {
	e.t.Helper()
	var pods []*v1.Pod
	for _, name := range e.mirrors.MirrorPodNames() {
		// The fake gives each mirror its own UID, as the API server does.
		m, _ := e.mirrors.MirrorPod(name)
		pods = append(pods, m)
	}
	e.set(mirror.ApiserverSource, pods...)
}

func (e *env) trace(uid types.UID) string { return e.syncer.Trace(uid) }

func (e *env) stage(uid types.UID) podworker.Stage {
	info, ok := e.workers.Pod(uid)
	if !ok {
		return podworker.StageAbsent
	}
	return info.Stage
}

func (e *env) rejections() []rejection {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.rejected)
}

// apiPod returns an API server pod with a 30s grace period.
func apiPod(uid types.UID, name string, created int) *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			UID: uid, Name: name, Namespace: "default",
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(created) * time.Second)),
		},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "app", Image: "app:1"}},
		},
	}
}

// withCPU sets the single container's CPU request.
func withCPU(pod *v1.Pod, cpu string) *v1.Pod {
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	return pod
}

// staticPod returns a static pod as a ManifestSource makes it, with a fixed
// UID when uid is not empty.
func staticPod(t *testing.T, uid types.UID, name string) *v1.Pod {
	t.Helper()
	grace := int64(30)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: uid, Name: name, Namespace: "kube-system"},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "app", Image: "app:1"}},
		},
	}
	require.NoError(t, mirror.PrepareStaticPod(pod, "node-a", mirror.FileSource))
	return pod
}

// mirrorOf returns the mirror pod the API server would hold for pod.
func mirrorOf(pod *v1.Pod, uid types.UID) *v1.Pod {
	m := pod.DeepCopy()
	m.UID = uid
	m.Annotations[mirror.ConfigMirrorAnnotationKey] = pod.Annotations[mirror.ConfigHashAnnotationKey]
	m.Annotations[mirror.ConfigSourceAnnotationKey] = mirror.ApiserverSource
	return m
}

// bubble runs f in a synctest bubble.
func bubble(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, f)
}
