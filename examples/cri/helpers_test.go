package cri_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/examples/cri"
)

// fakeRuntime is cri-api's fake runtime with StopContainer recorded and,
// optionally, made to block like a real runtime waiting out a grace period.
type fakeRuntime struct {
	*fakeapi.FakeRuntimeService

	mu    sync.Mutex
	stops []stopCall
	// blockGrace makes StopContainer with a timeout above 0 block until its
	// ctx ends (a container that ignores SIGTERM); entered is then sent to.
	blockGrace bool
	entered    chan string
	// keepRunning makes StopContainer succeed without stopping anything.
	keepRunning bool
	// configs are the configs CreateContainer was given, by container name.
	configs map[string][]*runtimeapi.ContainerConfig
}

func (f *fakeRuntime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	id, err := f.FakeRuntimeService.CreateContainer(ctx, sandboxID, config, sandboxConfig)
	if err == nil {
		f.mu.Lock()
		if f.configs == nil {
			f.configs = map[string][]*runtimeapi.ContainerConfig{}
		}
		name := config.GetMetadata().GetName()
		f.configs[name] = append(f.configs[name], config)
		f.mu.Unlock()
	}
	return id, err
}

// lastConfig is the config of the last instance of container name created.
func (f *fakeRuntime) lastConfig(t *testing.T, name string) *runtimeapi.ContainerConfig {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.configs[name], "no container %q created", name)
	return f.configs[name][len(f.configs[name])-1]
}

type stopCall struct {
	id      string
	timeout int64
}

func (f *fakeRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	f.mu.Lock()
	f.stops = append(f.stops, stopCall{id, timeout})
	block, keep := f.blockGrace && timeout > 0, f.keepRunning
	f.mu.Unlock()
	if block {
		select {
		case f.entered <- id:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}
	if keep {
		return nil
	}
	return f.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

func (f *fakeRuntime) stopCalls() []stopCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]stopCall(nil), f.stops...)
}

// env is a Syncer over the fakes, with a fake clock.
type env struct {
	rt       *fakeRuntime
	images   *fakeapi.FakeImageService
	clock    *testingclock.FakeClock
	syncer   *cri.Syncer
	mu       sync.Mutex
	statuses map[types.UID][]v1.PodStatus
}

const (
	testImage  = "busybox:test"
	testNodeIP = "192.0.2.10"
)

func newEnv(t *testing.T, mutate ...func(*cri.Options)) *env {
	t.Helper()
	e := &env{
		rt:       &fakeRuntime{FakeRuntimeService: fakeapi.NewFakeRuntimeService(), entered: make(chan string, 16)},
		images:   fakeapi.NewFakeImageService(),
		clock:    testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		statuses: make(map[types.UID][]v1.PodStatus),
	}
	e.images.SetFakeImages([]string{testImage})
	opts := cri.Options{
		Images:            e.images,
		NodeIPs:           []string{testNodeIP},
		RuntimeName:       "fake",
		RestartBackOff:    10 * time.Second,
		MaxRestartBackOff: 40 * time.Second,
		Clock:             e.clock,
		OnStatus: func(pod *v1.Pod, s v1.PodStatus) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.statuses[pod.UID] = append(e.statuses[pod.UID], s)
		},
	}
	for _, m := range mutate {
		m(&opts)
	}
	s, err := cri.New(e.rt, e.rt, opts)
	require.NoError(t, err)
	e.syncer = s
	return e
}

// lastStatus is the last API status the syncer reported for uid.
func (e *env) lastStatus(t *testing.T, uid types.UID) v1.PodStatus {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	require.NotEmpty(t, e.statuses[uid], "no status reported for %s", uid)
	return e.statuses[uid][len(e.statuses[uid])-1]
}

// status reads the pod's runtime status.
func (e *env) status(t *testing.T, uid types.UID) *cri.PodStatus {
	t.Helper()
	st, err := e.syncer.PodStatus(context.Background(), uid, time.Time{})
	require.NoError(t, err)
	return st
}

// sync runs SyncPod with a freshly read status, as the engine does.
func (e *env) sync(t *testing.T, pod *v1.Pod) (bool, error) {
	t.Helper()
	return e.syncer.SyncPod(context.Background(), 0, pod, nil, e.status(t, pod.UID))
}

// mustSync is sync that must succeed and not be terminal.
func (e *env) mustSync(t *testing.T, pod *v1.Pod) {
	t.Helper()
	terminal, err := e.sync(t, pod)
	require.NoError(t, err)
	require.False(t, terminal)
}

// container returns the newest instance of the pod's container name.
func (e *env) container(t *testing.T, uid types.UID, name string) cri.ContainerStatus {
	t.Helper()
	for _, c := range e.status(t, uid).Containers {
		if c.GetMetadata().GetName() == name {
			return c
		}
	}
	require.Failf(t, "no container", "pod %s has no container %q", uid, name)
	return cri.ContainerStatus{}
}

// exit makes the newest instance of container name exit with code after
// running for ranFor.
func (e *env) exit(t *testing.T, uid types.UID, name string, code int32, ranFor time.Duration) {
	t.Helper()
	id := e.container(t, uid, name).GetId()
	e.rt.Lock()
	defer e.rt.Unlock()
	c := e.rt.Containers[id]
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.FinishedAt = c.StartedAt + int64(ranFor)
}

// actions returns the fake's calls that change something, in order.
func (e *env) actions() []string {
	var out []string
	for _, c := range e.rt.GetCalls() {
		switch c {
		case "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "CreateContainer", "StartContainer", "StopContainer", "RemoveContainer":
			out = append(out, c)
		}
	}
	return out
}

// resetCalls forgets the fake's recorded calls.
func (e *env) resetCalls() {
	e.rt.Lock()
	e.rt.Called = nil
	e.rt.Unlock()
}

// counts returns how many sandboxes and containers the fake holds.
func (e *env) counts() (sandboxes, containers int) {
	e.rt.Lock()
	defer e.rt.Unlock()
	return len(e.rt.Sandboxes), len(e.rt.Containers)
}

func newPod(name string, mutate ...func(*v1.Pod)) *v1.Pod {
	grace := int64(5)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "app", Image: testImage, Command: []string{"sleep", "1000"}}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func withPolicy(p v1.RestartPolicy) func(*v1.Pod) {
	return func(pod *v1.Pod) { pod.Spec.RestartPolicy = p }
}

func withInit(names ...string) func(*v1.Pod) {
	return func(pod *v1.Pod) {
		for _, n := range names {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: testImage, Command: []string{"true"}})
		}
	}
}

func hostNetwork(pod *v1.Pod) { pod.Spec.HostNetwork = true }
