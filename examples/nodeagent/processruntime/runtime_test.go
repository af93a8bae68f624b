package processruntime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// ignoresTerm runs until SIGKILL.
const ignoresTerm = `trap '' TERM; while :; do sleep 1; done`

func TestEscalatesToSIGKILLAfterTheGracePeriod(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyAlways, "stubborn", ignoresTerm, "polite", "exec sleep 300")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	// A SIGTERM before the stubborn shell has set its trap would end it.
	eventually(t, 5*time.Second, "the stubborn container ignores SIGTERM", func() bool { return ignoringTerm(t, pod.UID, "stubborn") })

	start := time.Now()
	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 1, nil))
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 950*time.Millisecond, "SIGKILL came before the grace period ended")
	assert.Less(t, took, 4*time.Second, "SIGKILL came long after the grace period (the bound leaves room for a loaded machine)")
	assert.Empty(t, processes(t, pod.UID), "processes of the pod are left in the process table")

	st := status(t, rt, pod.UID)
	require.True(t, st.Stopped)
	stubborn, _ := st.Container("stubborn")
	require.NotNil(t, stubborn.Exit)
	assert.Equal(t, int32(137), stubborn.Exit.Code)
	assert.Equal(t, int32(9), stubborn.Exit.Signal)
	polite, _ := st.Container("polite")
	require.NotNil(t, polite.Exit)
	assert.Equal(t, int32(143), polite.Exit.Code, "sleep dies of SIGTERM")
	api := processruntime.APIStatus(pod, st)
	assert.Equal(t, v1.PodFailed, api.Phase)
	assert.Equal(t, 1, ev.count(func(e processruntime.Event) bool { return e.Type == processruntime.PodStopped && e.UID == pod.UID }))
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
}

func TestCancelledContextEscalatesAtOnce(t *testing.T) {
	t.Parallel()
	rt := openRuntime(t, processruntime.Options{})
	pod := newPod(v1.RestartPolicyAlways, "stubborn", ignoresTerm)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	eventually(t, 5*time.Second, "the container ignores SIGTERM", func() bool { return ignoringTerm(t, pod.UID, "stubborn") })

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err = rt.SyncTerminatingPod(ctx, pod, processruntime.PodStatus{}, 60, nil)
	took := time.Since(start)
	require.NoError(t, err, "everything was killed, so the hook may report success")
	assert.Less(t, took, 5*time.Second, "with a 60s grace period, only the cancellation can end the wait early")
	assert.Empty(t, processes(t, pod.UID))
	c, _ := status(t, rt, pod.UID).Container("stubborn")
	assert.Equal(t, int32(137), c.Exit.Code)
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
}

func TestProcessesLeftBehindAreKilledWithTheirContainer(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "parent", `sleep 300 & echo started; exit 0`)
	terminal, err := syncPod(rt, pod)
	require.NoError(t, err)
	ev.wait(t, "exit", exitedEvent(pod.UID, "parent", 1))
	eventually(t, 5*time.Second, "the background sleep is gone", func() bool { return len(containerProcesses(t, pod.UID)) == 0 })
	if !terminal {
		terminal, err = syncPod(rt, pod)
		require.NoError(t, err)
	}
	assert.True(t, terminal)
	terminate(t, rt, pod, 1)
}

func TestRestartPolicies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		policy   v1.RestartPolicy
		script   string
		restarts bool
		phase    v1.PodPhase
	}{
		{v1.RestartPolicyNever, "exit 0", false, v1.PodSucceeded},
		{v1.RestartPolicyNever, "exit 3", false, v1.PodFailed},
		{v1.RestartPolicyOnFailure, "exit 0", false, v1.PodSucceeded},
		{v1.RestartPolicyOnFailure, "exit 3", true, v1.PodRunning},
		{v1.RestartPolicyAlways, "exit 0", true, v1.PodRunning},
		{v1.RestartPolicyAlways, "exit 3", true, v1.PodRunning},
	}
	for _, tc := range cases {
		t.Run(string(tc.policy)+"/"+tc.script, func(t *testing.T) {
			t.Parallel()
			ev := newEvents()
			rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, Clock: testingclock.NewFakeClock(time.Now())})
			pod := newPod(tc.policy, "c", tc.script)
			_, err := syncPod(rt, pod)
			require.NoError(t, err)
			ev.wait(t, "exit", exitedEvent(pod.UID, "c", 1))
			terminal, err := syncPod(rt, pod)
			if err != nil {
				// Restarted at once, and already exited again.
				require.ErrorIs(t, err, processruntime.ErrBackOff)
			}
			assert.Equal(t, !tc.restarts, terminal, "terminal")
			if tc.restarts {
				// The first restart is immediate.
				ev.wait(t, "restart", func(e processruntime.Event) bool {
					return e.UID == pod.UID && e.Type == processruntime.ContainerStarted && e.Status.Containers[0].RestartCount == 1
				})
			}
			assert.Equal(t, tc.phase, processruntime.APIStatus(pod, status(t, rt, pod.UID)).Phase)
			terminate(t, rt, pod, 1)
		})
	}
}

func TestRestartBackoffDoublesUpToTheCap(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(time.Now())
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, Clock: clk, BackOff: 10 * time.Second, MaxBackOff: 30 * time.Second})
	// Each run crashes when the test creates the file "release".
	pod := newPod(v1.RestartPolicyAlways, "crash", `while [ ! -e release ]; do sleep 0.02; done; rm release; exit 1`)
	release := filepath.Join(rt.PodDir(pod.UID), "scratch", "release")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)

	// Exit n is followed by a wait of: 0, 10s, 20s, 30s, 30s.
	for n, want := range []time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second} {
		require.NoError(t, os.WriteFile(release, nil, 0o600))
		ev.wait(t, "exit", exitedEvent(pod.UID, "crash", n+1))
		if want == 0 {
			api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
			require.NotNil(t, api.ContainerStatuses[0].State.Terminated, "before an immediate restart the exit shows, as the kubelet shows it")
			assert.Equal(t, int32(1), api.ContainerStatuses[0].State.Terminated.ExitCode)
		}
		terminal, err := syncPod(rt, pod)
		require.False(t, terminal)
		if want == 0 {
			require.NoError(t, err, "the first restart is immediate")
		} else {
			require.ErrorIs(t, err, processruntime.ErrBackOff, "exit %d", n+1)
			var rd interface{ RetryDelay() time.Duration }
			require.True(t, errors.As(err, &rd), "the error tells the engine when to retry")
			assert.Equal(t, want, rd.RetryDelay(), "backoff after exit %d", n+1)
			c, _ := status(t, rt, pod.UID).Container("crash")
			assert.Equal(t, clk.Now().Add(want), c.BackOffUntil)
			api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
			require.NotNil(t, api.ContainerStatuses[0].State.Waiting)
			assert.Equal(t, processruntime.ReasonCrashLoopBackOff, api.ContainerStatuses[0].State.Waiting.Reason)
			assert.Equal(t, fmt.Sprintf("back-off %s restarting failed container=crash pod=%s_%s(%s)", want, pod.Name, pod.Namespace, pod.UID),
				api.ContainerStatuses[0].State.Waiting.Message, "the kubelet's message, with the backoff waited out")
			assert.Equal(t, int32(1), api.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode)
			// Not yet: one step short.
			clk.Step(want - time.Millisecond)
			_, err = syncPod(rt, pod)
			require.ErrorIs(t, err, processruntime.ErrBackOff)
			clk.Step(time.Millisecond)
			_, err = syncPod(rt, pod)
			require.NoError(t, err)
		}
		c, _ := status(t, rt, pod.UID).Container("crash")
		require.Equal(t, int32(n+1), c.RestartCount)
		require.Equal(t, processruntime.ContainerStateRunning, c.State)
	}
	terminate(t, rt, pod, 1)
}

func TestInitContainersRunInOrderBeforeTheMainContainers(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "main", `cat order; echo main >> order`)
	pod.Spec.InitContainers = []v1.Container{
		{Name: "first", Command: []string{"sh", "-c", "echo first >> order"}},
		{Name: "second", Command: []string{"sh", "-c", "sleep 0.2; echo second >> order"}},
	}
	terminal, exits := false, 0
	for !terminal {
		var err error
		terminal, err = syncPod(rt, pod)
		require.NoError(t, err)
		if !terminal {
			// Wait for the next exit rather than spinning.
			exits++
			seen := 0
			ev.wait(t, "next exit", func(e processruntime.Event) bool {
				if e.UID == pod.UID && e.Type == processruntime.ContainerExited {
					seen++
				}
				return seen >= exits
			})
		}
	}
	data, err := os.ReadFile(filepath.Join(rt.PodDir(pod.UID), "scratch", "order"))
	require.NoError(t, err)
	assert.Equal(t, "first\nsecond\nmain\n", string(data))
	assert.Equal(t, "first\nsecond\n", readLog(t, rt, pod.UID, "main"), "the main container saw both init containers' work")

	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	assert.Equal(t, v1.PodSucceeded, api.Phase)
	require.Len(t, api.InitContainerStatuses, 2)
	assert.Equal(t, "Completed", api.InitContainerStatuses[1].State.Terminated.Reason)
	terminate(t, rt, pod, 1)
}

func TestAFailedInitContainerFailsThePodUnderNever(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "main", `echo must not run`)
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Command: []string{"sh", "-c", "exit 7"}}}
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	ev.wait(t, "init exit", exitedEvent(pod.UID, "init", 1))
	terminal, err := syncPod(rt, pod)
	require.NoError(t, err)
	assert.True(t, terminal)
	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 30, nil))
	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	assert.Equal(t, v1.PodFailed, api.Phase)
	assert.Equal(t, int32(7), api.InitContainerStatuses[0].State.Terminated.ExitCode)
	assert.Nil(t, api.ContainerStatuses[0].State.Running, "the main container never ran")
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
}

func TestACommandThatCannotBeFoundIsAClearStartError(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, Path: "/nonexistent-bin"})
	pod := newPod(v1.RestartPolicyNever)
	pod.Spec.Containers = []v1.Container{{Name: "c", Command: []string{"sleep", "1"}}}
	terminal, err := syncPod(rt, pod)
	require.NoError(t, err)
	assert.True(t, terminal, "under Never a container that cannot start ends the pod")
	c, _ := status(t, rt, pod.UID).Container("c")
	require.NotNil(t, c.Exit)
	assert.Equal(t, int32(128), c.Exit.Code)
	assert.Equal(t, processruntime.ReasonStartError, c.Exit.Reason)
	assert.Equal(t, `command "sleep" not found in PATH "/nonexistent-bin"`, c.Exit.Message)
	_, err = rt.LookPath("sleep")
	assert.EqualError(t, err, `command "sleep" not found in PATH "/nonexistent-bin"`)
	terminate(t, rt, pod, 1)
}

func TestEnvironmentAndWorkingDirectory(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	// A directory of the host's every pod sees (a sandboxed one has a /tmp
	// of its own).
	dir := "/usr/bin"
	pod := newPod(v1.RestartPolicyNever)
	pod.Spec.NodeName = "node-a"
	pod.Spec.Containers = []v1.Container{{
		Name:       "env",
		Command:    []string{"sh", "-c"},
		Args:       []string{`echo "$GREETING $POD_NAME $NODE $PODKIT_CONTAINER_NAME $(pwd)"`},
		WorkingDir: dir,
		Env: []v1.EnvVar{
			{Name: "GREETING", Value: "hello"},
			{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: processruntime.EnvContainerName, Value: "cannot override"},
		},
	}}
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	ev.wait(t, "exit", exitedEvent(pod.UID, "env", 1))
	assert.Equal(t, "hello "+pod.Name+" node-a env "+dir+"\n", readLog(t, rt, pod.UID, "env"))
	terminate(t, rt, pod, 1)
}

func TestFinalStatusFuncIsApplied(t *testing.T) {
	t.Parallel()
	rt := openRuntime(t, processruntime.Options{})
	pod := newPod(v1.RestartPolicyAlways, "c", "exec sleep 300")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	fn := func(s *v1.PodStatus) { s.Reason, s.Message = "Evicted", "the node ran out of disk" }
	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 5, fn))
	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	assert.Equal(t, "Evicted", api.Reason)
	assert.Equal(t, v1.PodFailed, api.Phase, "sleep died of SIGTERM")
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
}

func TestOpen(t *testing.T) {
	t.Parallel()
	_, err := processruntime.Open(processruntime.Options{})
	assert.EqualError(t, err, "processruntime: Options.StateDir is required")

	dir := t.TempDir()
	rt := openRuntime(t, processruntime.Options{StateDir: dir})
	_, err = processruntime.Open(processruntime.Options{StateDir: dir})
	assert.ErrorContains(t, err, "is in use by another runtime")
	require.NoError(t, rt.Close())
	require.NoError(t, rt.Close(), "Close is idempotent")
	rt2 := openRuntime(t, processruntime.Options{StateDir: dir})
	_, err = rt.SyncPod(context.Background(), podworker.SyncPodCreate, newPod(v1.RestartPolicyNever, "c", "true"), nil, processruntime.PodStatus{})
	assert.ErrorIs(t, err, processruntime.ErrClosed)
	assert.Empty(t, rt2.RuntimePods())

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = processruntime.Open(processruntime.Options{StateDir: file})
	assert.ErrorContains(t, err, "creating the state directory")

	_, err = processruntime.Open(processruntime.Options{StateDir: t.TempDir(), BackOff: time.Minute, MaxBackOff: time.Second})
	assert.ErrorContains(t, err, "MaxBackOff 1s is below BackOff 1m0s")
}

func TestValidatePod(t *testing.T) {
	t.Parallel()
	always := v1.ContainerRestartPolicyAlways
	cases := map[string]struct {
		mutate func(*v1.Pod)
		want   string
	}{
		"valid":        {func(*v1.Pod) {}, ""},
		"no UID":       {func(p *v1.Pod) { p.UID = "" }, "the pod has no UID"},
		"UID path":     {func(p *v1.Pod) { p.UID = "../x" }, `pod UID "../x" cannot name a directory`},
		"no container": {func(p *v1.Pod) { p.Spec.Containers = nil }, "has no containers"},
		// A command is resolved when the container starts (it may wait), a
		// sidecar is run: neither is refused.
		"no command": {func(p *v1.Pod) { p.Spec.Containers[0].Command = nil }, ""},
		"duplicate":  {func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{p.Spec.Containers[0]} }, `two containers are named "c"`},
		"sidecar": {func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "s", Command: []string{"true"}, RestartPolicy: &always}}
		}, ""},
		"envFrom": {func(p *v1.Pod) { p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{}} }, "envFrom"},
		"secret env": {func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{}}}}
		}, "a source other than a pod field"},
		"unknown field": {func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
		}, `refers to field "status.podIP"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := newPod(v1.RestartPolicyNever, "c", "true")
			tc.mutate(pod)
			err := processruntime.ValidatePod(pod)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, processruntime.ErrUnsupported)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestScanProcessesFindsContainerProcesses(t *testing.T) {
	t.Parallel()
	rt := openRuntime(t, processruntime.Options{})
	pod := newPod(v1.RestartPolicyAlways, "c", "sleep 300 & wait")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	containerProcs := func() []processruntime.Process {
		var out []processruntime.Process
		for _, p := range processes(t, pod.UID) {
			if !p.Sandbox {
				out = append(out, p)
			} else {
				assert.Empty(t, p.Container)
				assert.False(t, p.Leader, "a sandbox leads no container")
			}
		}
		return out
	}
	eventually(t, 5*time.Second, "the shell and its sleep run", func() bool { return len(containerProcs()) == 2 })
	procs := containerProcs()
	leaders := 0
	for _, p := range procs {
		assert.Equal(t, "c", p.Container)
		assert.Equal(t, procs[0].PGID, p.PGID, "one process group per container")
		if p.Leader {
			leaders++
			c, _ := status(t, rt, pod.UID).Container("c")
			assert.Equal(t, c.PID, p.PID)
			assert.True(t, strings.HasPrefix(c.ID, "process://"))
		}
	}
	assert.Equal(t, 1, leaders)
	terminate(t, rt, pod, 5)
	assert.Empty(t, processes(t, pod.UID))
}
