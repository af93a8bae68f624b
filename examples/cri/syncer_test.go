package cri_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/podworker"
)

var _ lifecycle.RuntimePodLister = (*cri.Syncer)(nil)

func TestNewRejectsInvalidInput(t *testing.T) {
	rt := fakeapi.NewFakeRuntimeService()
	for name, tc := range map[string]struct {
		sandboxes bool
		container bool
		opts      cri.Options
		want      string
	}{
		"no sandbox manager":   {container: true, want: "PodSandboxManager"},
		"no container manager": {sandboxes: true, want: "ContainerManager"},
		"negative back-off":    {sandboxes: true, container: true, opts: cri.Options{RestartBackOff: -1}, want: "RestartBackOff"},
		"max below back-off":   {sandboxes: true, container: true, opts: cri.Options{RestartBackOff: time.Minute, MaxRestartBackOff: time.Second}, want: "below"},
		"negative kill":        {sandboxes: true, container: true, opts: cri.Options{KillTimeout: -1}, want: "KillTimeout"},
	} {
		t.Run(name, func(t *testing.T) {
			var s *fakeapi.FakeRuntimeService
			var c *fakeapi.FakeRuntimeService
			if tc.sandboxes {
				s = rt
			}
			if tc.container {
				c = rt
			}
			var err error
			switch {
			case s == nil:
				_, err = cri.New(nil, c, tc.opts)
			case c == nil:
				_, err = cri.New(s, nil, tc.opts)
			default:
				_, err = cri.New(s, c, tc.opts)
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSyncPodRunsSandboxAndContainers(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate      func(*v1.Pod)
		network     runtimeapi.NamespaceMode
		hostname    string
		wantPodIP   string
		wantAddlIPs int
	}{
		"pod network":  {mutate: func(*v1.Pod) {}, network: runtimeapi.NamespaceMode_POD, hostname: "web", wantPodIP: fakeapi.FakePodSandboxIPs[0]},
		"host network": {mutate: hostNetwork, network: runtimeapi.NamespaceMode_NODE, hostname: "", wantPodIP: testNodeIP},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			pod := newPod("web", tc.mutate)
			e.mustSync(t, pod)
			assert.Equal(t, []string{"RunPodSandbox", "CreateContainer", "StartContainer"}, e.actions())

			st := e.status(t, pod.UID)
			require.Len(t, st.Sandboxes, 1)
			sb := st.Sandboxes[0]
			assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, sb.GetState())
			assert.Equal(t, tc.network, sb.GetLinux().GetNamespaces().GetOptions().GetNetwork())
			assert.Equal(t, map[string]string{
				"app": "web", cri.LabelPodName: "web", cri.LabelPodNamespace: "ns", cri.LabelPodUID: "web-uid", cri.LabelManaged: "true",
			}, sb.GetLabels())
			require.Len(t, st.Containers, 1)
			c := st.Containers[0]
			assert.Equal(t, sb.GetId(), c.SandboxID)
			assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, c.GetState())
			assert.Equal(t, "app", c.GetLabels()[cri.LabelContainerName])
			assert.True(t, st.Running())
			assert.False(t, e.syncer.NothingRunning(st))

			// The sandbox config the runtime got: hostname only with a pod network.
			e.rt.Lock()
			meta := e.rt.Sandboxes[sb.GetId()].GetMetadata()
			e.rt.Unlock()
			assert.Equal(t, uint32(0), meta.GetAttempt())

			api := st.APIStatus(pod)
			assert.Equal(t, v1.PodRunning, api.Phase)
			assert.Equal(t, tc.wantPodIP, api.PodIP)
			assert.Equal(t, testNodeIP, api.HostIP)
			require.Len(t, api.ContainerStatuses, 1)
			cs := api.ContainerStatuses[0]
			assert.NotNil(t, cs.State.Running)
			assert.True(t, cs.Ready)
			assert.Equal(t, "fake://"+c.GetId(), cs.ContainerID)
			assert.Equal(t, int32(0), cs.RestartCount)

			// In sync: a second SyncPod changes nothing.
			e.resetCalls()
			e.mustSync(t, pod)
			assert.Empty(t, e.actions())
		})
	}
}

func TestSandboxConfigHostname(t *testing.T) {
	// The fake keeps no sandbox config, so capture it from CreateContainer's
	// argument, which is the sandbox's config.
	for name, tc := range map[string]struct {
		mutate   func(*v1.Pod)
		hostname string
	}{
		"pod network":  {mutate: func(*v1.Pod) {}, hostname: "web"},
		"host network": {mutate: hostNetwork, hostname: ""},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			cap := &capturingRuntime{fakeRuntime: e.rt}
			s, err := cri.New(cap, cap, cri.Options{Images: e.images})
			require.NoError(t, err)
			pod := newPod("web", tc.mutate)
			_, err = s.SyncPod(context.Background(), podworker.SyncPodCreate, pod, nil, nil)
			require.NoError(t, err)
			require.NotNil(t, cap.sandbox)
			assert.Equal(t, tc.hostname, cap.sandbox.GetHostname())
			assert.Equal(t, runtimeapi.NamespaceMode_CONTAINER, cap.container.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid())
			assert.Equal(t, []string{"sleep", "1000"}, cap.container.GetCommand())
		})
	}
}

type capturingRuntime struct {
	*fakeRuntime
	sandbox   *runtimeapi.PodSandboxConfig
	container *runtimeapi.ContainerConfig
}

func (c *capturingRuntime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	c.sandbox, c.container = sandboxConfig, config
	return c.fakeRuntime.CreateContainer(ctx, sandboxID, config, sandboxConfig)
}

func TestSyncPodRunsInitContainersFirst(t *testing.T) {
	e := newEnv(t)
	pod := newPod("init", withInit("first", "second"))
	created := func() []string {
		var names []string
		for _, c := range e.status(t, pod.UID).Containers {
			names = append([]string{c.GetMetadata().GetName()}, names...)
		}
		return names
	}

	e.mustSync(t, pod)
	assert.Equal(t, []string{"first"}, created())
	assert.Equal(t, v1.PodPending, e.lastStatus(t, pod.UID).Phase)

	e.mustSync(t, pod) // "first" still runs: nothing new
	assert.Equal(t, []string{"first"}, created())

	e.exit(t, pod.UID, "first", 0, time.Second)
	e.mustSync(t, pod)
	assert.Equal(t, []string{"first", "second"}, created())

	e.exit(t, pod.UID, "second", 0, time.Second)
	e.mustSync(t, pod)
	assert.Equal(t, []string{"first", "second", "app"}, created())

	api := e.status(t, pod.UID).APIStatus(pod)
	assert.Equal(t, v1.PodRunning, api.Phase)
	require.Len(t, api.InitContainerStatuses, 2)
	assert.Equal(t, "Completed", api.InitContainerStatuses[0].State.Terminated.Reason)
	assert.Contains(t, api.Conditions, v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue})
	assert.Contains(t, api.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue})
}

func TestSyncPodFailedInitContainer(t *testing.T) {
	t.Run("restartPolicy Never: the pod fails", func(t *testing.T) {
		e := newEnv(t)
		pod := newPod("init", withInit("first"), withPolicy(v1.RestartPolicyNever))
		e.mustSync(t, pod)
		e.exit(t, pod.UID, "first", 3, time.Second)
		terminal, err := e.sync(t, pod)
		require.NoError(t, err)
		assert.True(t, terminal)
		assert.Equal(t, v1.PodFailed, e.lastStatus(t, pod.UID).Phase)
	})
	t.Run("restartPolicy OnFailure: it is retried", func(t *testing.T) {
		e := newEnv(t)
		pod := newPod("init", withInit("first"), withPolicy(v1.RestartPolicyOnFailure))
		e.mustSync(t, pod)
		e.exit(t, pod.UID, "first", 3, time.Second)
		e.mustSync(t, pod)
		c := e.container(t, pod.UID, "first")
		assert.Equal(t, uint32(1), c.GetMetadata().GetAttempt())
		assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, c.GetState())
		assert.Equal(t, v1.PodPending, e.status(t, pod.UID).APIStatus(pod).Phase)
	})
}

func TestSyncPodRestartPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy       v1.RestartPolicy
		exitCode     int32
		wantRestart  bool
		wantTerminal bool
		wantPhase    v1.PodPhase
	}{
		{v1.RestartPolicyAlways, 0, true, false, v1.PodRunning},
		{v1.RestartPolicyAlways, 1, true, false, v1.PodRunning},
		{v1.RestartPolicyOnFailure, 0, false, true, v1.PodSucceeded},
		{v1.RestartPolicyOnFailure, 1, true, false, v1.PodRunning},
		{v1.RestartPolicyNever, 0, false, true, v1.PodSucceeded},
		{v1.RestartPolicyNever, 1, false, true, v1.PodFailed},
	} {
		t.Run(string(tc.policy)+"/"+map[bool]string{true: "failed", false: "succeeded"}[tc.exitCode != 0], func(t *testing.T) {
			e := newEnv(t)
			pod := newPod("p", withPolicy(tc.policy))
			e.mustSync(t, pod)
			e.exit(t, pod.UID, "app", tc.exitCode, time.Second)
			e.resetCalls()

			terminal, err := e.sync(t, pod)
			require.NoError(t, err)
			assert.Equal(t, tc.wantTerminal, terminal)
			assert.Equal(t, tc.wantPhase, e.lastStatus(t, pod.UID).Phase, "phase reported before acting")
			if tc.wantRestart {
				assert.Equal(t, []string{"CreateContainer", "StartContainer"}, e.actions())
				api := e.status(t, pod.UID).APIStatus(pod)
				cs := api.ContainerStatuses[0]
				assert.Equal(t, int32(1), cs.RestartCount)
				assert.NotNil(t, cs.State.Running)
				require.NotNil(t, cs.LastTerminationState.Terminated)
				assert.Equal(t, tc.exitCode, cs.LastTerminationState.Terminated.ExitCode)
			} else {
				assert.Empty(t, e.actions())
			}
		})
	}
}

func TestSyncPodRestartBackOff(t *testing.T) {
	e := newEnv(t)
	pod := newPod("crash")
	e.mustSync(t, pod)

	retryDelay := func(err error) time.Duration {
		t.Helper()
		var rd interface{ RetryDelay() time.Duration }
		require.ErrorAs(t, err, &rd)
		return rd.RetryDelay()
	}

	// First crash: restarted at once.
	e.exit(t, pod.UID, "app", 1, time.Second)
	e.mustSync(t, pod)
	assert.Equal(t, uint32(1), e.container(t, pod.UID, "app").GetMetadata().GetAttempt())

	// Second crash: waits the initial back-off, and the engine is asked to
	// come back when it is over.
	e.exit(t, pod.UID, "app", 1, time.Second)
	_, err := e.sync(t, pod)
	require.ErrorIs(t, err, cri.ErrBackOff)
	assert.ErrorContains(t, err, `"app"`)
	assert.Equal(t, 10*time.Second, retryDelay(err))
	e.clock.Step(4 * time.Second)
	_, err = e.sync(t, pod)
	assert.Equal(t, 6*time.Second, retryDelay(err))
	e.clock.Step(6 * time.Second)
	e.mustSync(t, pod)
	assert.Equal(t, uint32(2), e.container(t, pod.UID, "app").GetMetadata().GetAttempt())

	// Only the newest dead instance is kept next to the running one.
	var attempts []uint32
	for _, c := range e.status(t, pod.UID).Containers {
		attempts = append(attempts, c.GetMetadata().GetAttempt())
	}
	assert.Equal(t, []uint32{2, 1}, attempts)

	// Third crash: the back-off doubled.
	e.exit(t, pod.UID, "app", 1, time.Second)
	_, err = e.sync(t, pod)
	assert.Equal(t, 20*time.Second, retryDelay(err))
	e.clock.Step(20 * time.Second)
	e.mustSync(t, pod)

	// A container that ran long enough starts over: restarted at once.
	e.exit(t, pod.UID, "app", 1, 2*40*time.Second)
	e.mustSync(t, pod)
	assert.Equal(t, uint32(4), e.container(t, pod.UID, "app").GetMetadata().GetAttempt())
	assert.Equal(t, int32(4), e.status(t, pod.UID).APIStatus(pod).ContainerStatuses[0].RestartCount)
}

func TestSyncPodMissingImage(t *testing.T) {
	e := newEnv(t)
	pod := newPod("img", func(p *v1.Pod) { p.Spec.Containers[0].Image = "registry.example/missing:1" })
	_, err := e.sync(t, pod)
	require.ErrorIs(t, err, cri.ErrImageNotPresent)
	assert.ErrorContains(t, err, `image "registry.example/missing:1" of container "app" of pod ns/img`)
	assert.Equal(t, []string{"RunPodSandbox"}, e.actions(), "no container is created, and nothing is pulled")
	assert.NotContains(t, e.images.Called, "PullImage")
	assert.Equal(t, v1.PodPending, e.status(t, pod.UID).APIStatus(pod).Phase)

	// Once the image is there, the next sync creates the container.
	e.images.SetFakeImages([]string{testImage, "registry.example/missing:1"})
	e.mustSync(t, pod)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, e.container(t, pod.UID, "app").GetState())
}

func TestSyncPodInjectedErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		call string
		want string
	}{
		{"ListPodSandbox", "listing the sandboxes of pod"},
		{"ListContainers", "listing the containers of pod"},
		{"RunPodSandbox", "running the sandbox of pod ns/p (p-uid) (host network false, attempt 0)"},
		{"CreateContainer", `creating container "app" of pod ns/p (p-uid) from image "busybox:test"`},
		{"StartContainer", `starting container "app"`},
	} {
		t.Run(tc.call, func(t *testing.T) {
			e := newEnv(t)
			pod := newPod("p")
			e.rt.InjectError(tc.call, boom)
			_, err := e.syncer.SyncPod(context.Background(), podworker.SyncPodCreate, pod, nil, nil)
			require.ErrorIs(t, err, boom)
			assert.ErrorContains(t, err, tc.want)

			// The error was one-off: the next sync brings the pod up.
			e.mustSync(t, pod)
			assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, e.container(t, pod.UID, "app").GetState())
			sandboxes, _ := e.counts()
			assert.Equal(t, 1, sandboxes)
		})
	}
	t.Run("ImageStatus", func(t *testing.T) {
		e := newEnv(t)
		e.images.InjectError("ImageStatus", boom)
		_, err := e.sync(t, newPod("p"))
		require.ErrorIs(t, err, boom)
		assert.ErrorContains(t, err, `checking image "busybox:test"`)
	})
	t.Run("one container failing does not stop the others", func(t *testing.T) {
		e := newEnv(t)
		pod := newPod("p", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "second", Image: testImage})
		})
		e.rt.InjectError("StartContainer", boom)
		_, err := e.sync(t, pod)
		require.ErrorIs(t, err, boom)
		assert.Equal(t, runtimeapi.ContainerState_CONTAINER_CREATED, e.container(t, pod.UID, "app").GetState())
		assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, e.container(t, pod.UID, "second").GetState())
		// A created container is started by the next sync, not recreated.
		e.mustSync(t, pod)
		assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, e.container(t, pod.UID, "app").GetState())
		assert.Equal(t, uint32(0), e.container(t, pod.UID, "app").GetMetadata().GetAttempt())
	})
}

func TestSyncPodReplacesDeadSandbox(t *testing.T) {
	e := newEnv(t)
	pod := newPod("sb")
	e.mustSync(t, pod)
	old := e.status(t, pod.UID).Sandboxes[0].GetId()
	e.rt.Lock()
	e.rt.Sandboxes[old].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	e.rt.Unlock()
	e.resetCalls()

	e.mustSync(t, pod)
	assert.Equal(t, []string{"StopContainer", "StopPodSandbox", "RunPodSandbox", "CreateContainer", "StartContainer"}, e.actions())
	st := e.status(t, pod.UID)
	require.Len(t, st.Sandboxes, 2)
	assert.Equal(t, uint32(1), st.ReadySandbox().GetMetadata().GetAttempt())
	c := e.container(t, pod.UID, "app")
	assert.Equal(t, st.ReadySandbox().GetId(), c.SandboxID)
	assert.Equal(t, uint32(1), c.GetMetadata().GetAttempt(), "restart counts go on across sandboxes")

	t.Run("restartPolicy Never: terminal instead", func(t *testing.T) {
		e := newEnv(t)
		pod := newPod("never", withPolicy(v1.RestartPolicyNever))
		e.mustSync(t, pod)
		e.rt.Lock()
		for _, sb := range e.rt.Sandboxes {
			sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		}
		e.rt.Unlock()
		e.resetCalls()
		terminal, err := e.sync(t, pod)
		require.NoError(t, err)
		assert.True(t, terminal)
		assert.Empty(t, e.actions())
		assert.Equal(t, v1.PodFailed, e.lastStatus(t, pod.UID).Phase)
	})
}

func TestSyncTerminatingPod(t *testing.T) {
	e := newEnv(t)
	pod := newPod("term", func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "second", Image: testImage})
	})
	e.mustSync(t, pod)
	e.resetCalls()

	var applied bool
	err := e.syncer.SyncTerminatingPod(context.Background(), pod, e.status(t, pod.UID), 7, func(s *v1.PodStatus) {
		applied = true
		s.Reason = "Deleted"
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"StopContainer", "StopContainer", "StopPodSandbox"}, e.actions())
	for _, c := range e.rt.stopCalls() {
		assert.Equal(t, int64(7), c.timeout, "the grace period is the stop timeout")
	}
	st := e.status(t, pod.UID)
	assert.True(t, e.syncer.NothingRunning(st))
	assert.Nil(t, st.ReadySandbox())

	assert.True(t, applied)
	final := e.lastStatus(t, pod.UID)
	assert.Equal(t, "Deleted", final.Reason)
	assert.Equal(t, v1.PodSucceeded, final.Phase, "the fake's stopped containers exit with 0")
	assert.Contains(t, final.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodCompleted"})

	// Again: nothing left to stop, sandboxes stopped again (idempotent).
	e.resetCalls()
	require.NoError(t, e.syncer.SyncTerminatingPod(context.Background(), pod, nil, 7, nil))
	assert.Equal(t, []string{"StopPodSandbox"}, e.actions())
}

func TestSyncTerminatingPodErrors(t *testing.T) {
	t.Run("StopContainer fails", func(t *testing.T) {
		e := newEnv(t)
		pod := newPod("p")
		e.mustSync(t, pod)
		e.rt.InjectError("StopContainer", errors.New("boom"))
		err := e.syncer.SyncTerminatingPod(context.Background(), pod, nil, 3, nil)
		assert.ErrorContains(t, err, `stopping container "app"`)
		assert.ErrorContains(t, err, "timeout 3s")
		assert.False(t, e.syncer.NothingRunning(e.status(t, pod.UID)))
		require.NoError(t, e.syncer.SyncTerminatingPod(context.Background(), pod, nil, 3, nil))
	})
	t.Run("the runtime says stopped but a container still runs", func(t *testing.T) {
		e := newEnv(t)
		pod := newPod("p")
		e.mustSync(t, pod)
		e.rt.keepRunning = true
		err := e.syncer.SyncTerminatingPod(context.Background(), pod, nil, 3, nil)
		assert.ErrorContains(t, err, `still runs: containers ["app"]`)
	})
}

func TestSyncTerminatingPodCancelEscalates(t *testing.T) {
	e := newEnv(t)
	pod := newPod("slow")
	e.mustSync(t, pod)
	e.rt.blockGrace = true

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.syncer.SyncTerminatingPod(ctx, pod, e.status(t, pod.UID), 30, nil) }()
	<-e.rt.entered // stopping with the 30 s grace: the container ignores SIGTERM
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "killed without grace")
	calls := e.rt.stopCalls()
	require.Len(t, calls, 2)
	assert.Equal(t, int64(30), calls[0].timeout)
	assert.Equal(t, int64(0), calls[1].timeout, "the cancelled stop escalates to a kill")
	assert.True(t, e.syncer.NothingRunning(e.status(t, pod.UID)))

	t.Run("already cancelled", func(t *testing.T) {
		e := newEnv(t)
		pod := newPod("p")
		e.mustSync(t, pod)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := e.syncer.SyncTerminatingPod(ctx, pod, nil, 30, nil)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, []stopCall{{e.container(t, pod.UID, "app").GetId(), 0}}, e.rt.stopCalls(), "killed at once")
		assert.True(t, e.syncer.NothingRunning(e.status(t, pod.UID)))
	})
}

func TestSyncTerminatedPodRefusesARunningPod(t *testing.T) {
	e := newEnv(t)
	pod := newPod("early")
	e.mustSync(t, pod)
	err := e.syncer.SyncTerminatedPod(context.Background(), pod, nil)
	assert.ErrorContains(t, err, `not removing pod early-uid: cri: pod early-uid still runs: containers ["app"], 1 ready sandbox(es)`)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, e.container(t, pod.UID, "app").GetState(), "nothing was removed")
}

func TestSyncTerminatedPodIsIdempotent(t *testing.T) {
	e := newEnv(t)
	pod := newPod("gone", withInit("init"))
	e.mustSync(t, pod)
	e.exit(t, pod.UID, "init", 0, time.Second)
	e.mustSync(t, pod)
	require.NoError(t, e.syncer.SyncTerminatingPod(context.Background(), pod, nil, 1, nil))

	e.rt.InjectError("RemoveContainer", errors.New("busy"))
	err := e.syncer.SyncTerminatedPod(context.Background(), pod, nil)
	assert.ErrorContains(t, err, "removing container")

	require.NoError(t, e.syncer.SyncTerminatedPod(context.Background(), pod, nil))
	sandboxes, containers := e.counts()
	assert.Zero(t, sandboxes)
	assert.Zero(t, containers)
	require.NoError(t, e.syncer.SyncTerminatedPod(context.Background(), pod, nil), "again: nothing to do")
}

func TestRuntimePodsAndOrphans(t *testing.T) {
	e := newEnv(t)
	a, b := newPod("a"), newPod("b")
	e.mustSync(t, a)
	e.mustSync(t, b)
	// A sandbox some other agent made is not ours to list.
	_, err := e.rt.RunPodSandbox(context.Background(), &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "foreign", Namespace: "ns", Uid: "foreign-uid"},
		Labels:   map[string]string{cri.LabelPodUID: "foreign-uid"},
	}, "")
	require.NoError(t, err)

	pods, err := e.syncer.ListRuntimePods(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []podworker.RuntimePod{{UID: "a-uid", Namespace: "ns", Name: "a"}, {UID: "b-uid", Namespace: "ns", Name: "b"}}, pods)

	require.NoError(t, e.syncer.SyncTerminatingRuntimePod(context.Background(), podworker.RuntimePod{UID: "a-uid", Namespace: "ns", Name: "a"}))
	for _, c := range e.rt.stopCalls() {
		assert.Equal(t, int64(1), c.timeout)
	}
	pods, err = e.syncer.ListRuntimePods(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []podworker.RuntimePod{{UID: "b-uid", Namespace: "ns", Name: "b"}}, pods)
	require.NoError(t, e.syncer.SyncTerminatingRuntimePod(context.Background(), podworker.RuntimePod{UID: "a-uid"}), "idempotent")

	e.rt.InjectError("ListContainers", errors.New("boom"))
	_, err = e.syncer.ListRuntimePods(context.Background())
	assert.ErrorContains(t, err, "listing the runtime's containers")
}

func TestEngineDrivesTheSyncer(t *testing.T) {
	e := newEnv(t)
	// The syncer, telling the test when its first SyncPod succeeded (a
	// SyncPod that changes nothing in the window is no transition to wait
	// for).
	synced := make(chan struct{})
	var once sync.Once
	syncer := podworker.PodSyncerFuncs[*cri.PodStatus]{
		SyncPodFunc: func(ctx context.Context, ut podworker.UpdateType, pod, mirror *v1.Pod, st *cri.PodStatus) (bool, error) {
			terminal, err := e.syncer.SyncPod(ctx, ut, pod, mirror, st)
			if err == nil {
				once.Do(func() { close(synced) })
			}
			return terminal, err
		},
		SyncTerminatingPodFunc: e.syncer.SyncTerminatingPod,
		SyncTerminatedPodFunc:  e.syncer.SyncTerminatedPod,
	}
	w, err := podworker.New[*cri.PodStatus](syncer, podworker.Options[*cri.PodStatus]{Status: e.syncer})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	defer func() { stop(); require.NoError(t, <-ran) }()

	pod := newPod("e2e", withPolicy(v1.RestartPolicyNever))
	require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
	select {
	case <-synced:
	case <-ctx.Done():
		require.FailNow(t, "SyncPod did not succeed in time")
	}
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, e.container(t, pod.UID, "app").GetState())

	require.NoError(t, w.KillPod(ctx, pod, podworker.KillPodOptions{}))
	assert.True(t, e.syncer.NothingRunning(e.status(t, pod.UID)), "KillPod returns once nothing runs")
	_, _, err = w.WaitFor(ctx, pod.UID, func(i podworker.PodInfo, ok bool) bool { return ok && i.Finished })
	require.NoError(t, err)
	sandboxes, containers := e.counts()
	assert.Zero(t, sandboxes+containers)
}
