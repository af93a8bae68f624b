package processruntime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

func TestAPIStatusDerivesThePhaseLikeTheKubelet(t *testing.T) {
	t.Parallel()
	now := time.Now()
	running := processruntime.ContainerStatus{State: processruntime.ContainerStateRunning, PID: 42, StartedAt: now}
	exited := func(code int32) processruntime.ContainerStatus {
		reason := processruntime.ReasonCompleted
		if code != 0 {
			reason = processruntime.ReasonError
		}
		return processruntime.ContainerStatus{State: processruntime.ContainerStateExited, Exit: &processruntime.ExitStatus{Code: code, Reason: reason, FinishedAt: now}}
	}
	named := func(name string, c processruntime.ContainerStatus) processruntime.ContainerStatus {
		c.Name = name
		return c
	}
	// backingOff: exited, its restart waits out a 20s backoff.
	backingOff := func(c processruntime.ContainerStatus) processruntime.ContainerStatus {
		c.BackOff = 20 * time.Second
		c.BackOffUntil = c.Exit.FinishedAt.Add(c.BackOff)
		return c
	}
	cases := []struct {
		name      string
		policy    v1.RestartPolicy
		init      []processruntime.ContainerStatus
		main      []processruntime.ContainerStatus
		stopped   bool
		phase     v1.PodPhase
		ready     v1.ConditionStatus
		initDone  v1.ConditionStatus
		waitingOn string // the main container's waiting reason, if any
		// terminated: the main container shows its exit (it is not
		// waiting to restart).
		terminated bool
	}{
		{name: "nothing started", policy: v1.RestartPolicyAlways, phase: v1.PodPending, ready: v1.ConditionFalse, initDone: v1.ConditionTrue, waitingOn: processruntime.ReasonContainerCreating},
		{name: "running", policy: v1.RestartPolicyAlways, main: []processruntime.ContainerStatus{named("a", running)}, phase: v1.PodRunning, ready: v1.ConditionTrue, initDone: v1.ConditionTrue},
		{name: "init running", policy: v1.RestartPolicyAlways, init: []processruntime.ContainerStatus{named("i", running)}, phase: v1.PodPending, ready: v1.ConditionFalse, initDone: v1.ConditionFalse, waitingOn: processruntime.ReasonPodInitializing},
		{name: "init failed under Never", policy: v1.RestartPolicyNever, init: []processruntime.ContainerStatus{named("i", exited(2))}, phase: v1.PodFailed, ready: v1.ConditionFalse, initDone: v1.ConditionFalse},
		{name: "init failed under OnFailure", policy: v1.RestartPolicyOnFailure, init: []processruntime.ContainerStatus{named("i", exited(2))}, phase: v1.PodPending, ready: v1.ConditionFalse, initDone: v1.ConditionFalse},
		{name: "succeeded under Never", policy: v1.RestartPolicyNever, init: []processruntime.ContainerStatus{named("i", exited(0))}, main: []processruntime.ContainerStatus{named("a", exited(0))}, phase: v1.PodSucceeded, ready: v1.ConditionFalse, initDone: v1.ConditionTrue},
		{name: "failed under Never", policy: v1.RestartPolicyNever, main: []processruntime.ContainerStatus{named("a", exited(1))}, phase: v1.PodFailed, ready: v1.ConditionFalse, initDone: v1.ConditionTrue},
		{name: "crash looping under OnFailure", policy: v1.RestartPolicyOnFailure, main: []processruntime.ContainerStatus{named("a", backingOff(exited(1)))}, phase: v1.PodRunning, ready: v1.ConditionFalse, initDone: v1.ConditionTrue, waitingOn: processruntime.ReasonCrashLoopBackOff},
		{name: "exited under Always, in backoff", policy: v1.RestartPolicyAlways, main: []processruntime.ContainerStatus{named("a", backingOff(exited(0)))}, phase: v1.PodRunning, ready: v1.ConditionFalse, initDone: v1.ConditionTrue, waitingOn: processruntime.ReasonCrashLoopBackOff},
		{name: "first exit under Always, restarts at once", policy: v1.RestartPolicyAlways, main: []processruntime.ContainerStatus{named("a", exited(1))}, phase: v1.PodRunning, ready: v1.ConditionFalse, initDone: v1.ConditionTrue, terminated: true},
		{name: "exited under Never, not restarted", policy: v1.RestartPolicyNever, main: []processruntime.ContainerStatus{named("a", backingOff(exited(1)))}, phase: v1.PodFailed, ready: v1.ConditionFalse, initDone: v1.ConditionTrue, terminated: true},
		{name: "stopped, all exited 0", policy: v1.RestartPolicyAlways, main: []processruntime.ContainerStatus{named("a", exited(0))}, stopped: true, phase: v1.PodSucceeded, ready: v1.ConditionFalse, initDone: v1.ConditionTrue},
		{name: "stopped, killed by SIGTERM", policy: v1.RestartPolicyAlways, main: []processruntime.ContainerStatus{named("a", exited(143))}, stopped: true, phase: v1.PodFailed, ready: v1.ConditionFalse, initDone: v1.ConditionTrue},
		{name: "stopped before starting", policy: v1.RestartPolicyAlways, stopped: true, phase: v1.PodFailed, ready: v1.ConditionFalse, initDone: v1.ConditionTrue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod(tc.policy, "a", "true")
			if len(tc.init) > 0 {
				pod.Spec.InitContainers = []v1.Container{{Name: "i", Command: []string{"true"}}}
			}
			st := processruntime.PodStatus{UID: pod.UID, StartedAt: now, Time: now, Stopped: tc.stopped, InitContainers: tc.init, Containers: tc.main}
			api := processruntime.APIStatus(pod, st)
			assert.Equal(t, tc.phase, api.Phase)
			conds := map[v1.PodConditionType]v1.ConditionStatus{}
			for _, c := range api.Conditions {
				conds[c.Type] = c.Status
			}
			assert.Equal(t, tc.ready, conds[v1.PodReady], "Ready")
			assert.Equal(t, tc.ready, conds[v1.ContainersReady], "ContainersReady")
			assert.Equal(t, tc.initDone, conds[v1.PodInitialized], "Initialized")
			assert.Equal(t, v1.ConditionTrue, conds[v1.PodScheduled])
			wantSandbox := v1.ConditionTrue
			if tc.stopped {
				wantSandbox = v1.ConditionFalse
			}
			assert.Equal(t, wantSandbox, conds[v1.PodReadyToStartContainers])
			require.Len(t, api.ContainerStatuses, 1)
			if tc.waitingOn != "" {
				require.NotNil(t, api.ContainerStatuses[0].State.Waiting)
				assert.Equal(t, tc.waitingOn, api.ContainerStatuses[0].State.Waiting.Reason)
			}
			if tc.stopped {
				require.NotNil(t, api.ContainerStatuses[0].State.Terminated, "a stopped pod's containers all have a terminated state")
			}
			if tc.terminated {
				require.NotNil(t, api.ContainerStatuses[0].State.Terminated)
				assert.Nil(t, api.ContainerStatuses[0].State.Waiting)
			}
		})
	}
}

func TestAPIStatusKeepsTransitionTimesOfUnchangedConditions(t *testing.T) {
	t.Parallel()
	pod := newPod(v1.RestartPolicyAlways, "a", "true")
	t0 := time.Now().Add(-time.Hour)
	st := processruntime.PodStatus{StartedAt: t0, Time: t0, Containers: []processruntime.ContainerStatus{{Name: "a", State: processruntime.ContainerStateRunning, StartedAt: t0}}}
	pod.Status = processruntime.APIStatus(pod, st)
	st.Time = time.Now()
	again := processruntime.APIStatus(pod, st)
	for i, c := range again.Conditions {
		assert.True(t, c.LastTransitionTime.Equal(&pod.Status.Conditions[i].LastTransitionTime), "condition %s", c.Type)
	}
	assert.Equal(t, int32(0), again.ContainerStatuses[0].RestartCount)
	assert.True(t, *again.ContainerStatuses[0].Started)
}

func TestAPIStatusInitContainersAreReadyOnceCompleted(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pod := newPod(v1.RestartPolicyAlways, "a", "true")
	pod.Spec.InitContainers = []v1.Container{{Name: "i", Command: []string{"true"}}}
	for _, tc := range []struct {
		name  string
		init  processruntime.ContainerStatus
		ready bool
	}{
		{"running", processruntime.ContainerStatus{Name: "i", State: processruntime.ContainerStateRunning, PID: 42, StartedAt: now}, false},
		{"completed", processruntime.ContainerStatus{Name: "i", State: processruntime.ContainerStateExited, Exit: &processruntime.ExitStatus{Code: 0, Reason: processruntime.ReasonCompleted, FinishedAt: now}}, true},
		{"failed", processruntime.ContainerStatus{Name: "i", State: processruntime.ContainerStateExited, Exit: &processruntime.ExitStatus{Code: 1, Reason: processruntime.ReasonError, FinishedAt: now}}, false},
	} {
		api := processruntime.APIStatus(pod, processruntime.PodStatus{UID: pod.UID, StartedAt: now, Time: now, InitContainers: []processruntime.ContainerStatus{tc.init}})
		require.Len(t, api.InitContainerStatuses, 1)
		assert.Equal(t, tc.ready, api.InitContainerStatuses[0].Ready, tc.name)
	}
}

func TestAPIStatusObservesTheGeneration(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pod := newPod(v1.RestartPolicyAlways, "a", "true")
	pod.Generation = 3
	api := processruntime.APIStatus(pod, processruntime.PodStatus{UID: pod.UID, StartedAt: now, Time: now,
		Containers: []processruntime.ContainerStatus{{Name: "a", State: processruntime.ContainerStateRunning, StartedAt: now}}})
	assert.Equal(t, int64(3), api.ObservedGeneration)
	require.NotEmpty(t, api.Conditions)
	for _, c := range api.Conditions {
		assert.Equal(t, int64(3), c.ObservedGeneration, "condition %s", c.Type)
	}
}

func TestAPIStatusPodReadyToStartContainers(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pod := newPod(v1.RestartPolicyNever, "a", "true")
	exited := processruntime.ContainerStatus{Name: "a", State: processruntime.ContainerStateExited, Exit: &processruntime.ExitStatus{Code: 0, Reason: processruntime.ReasonCompleted, FinishedAt: now}}
	for _, tc := range []struct {
		name            string
		status          processruntime.PodStatus
		want            v1.ConditionStatus
		reason, message string
	}{
		{"before the first sync", processruntime.PodStatus{Time: now}, v1.ConditionFalse, "PodSandboxNotReady", "no pod sandbox exists"},
		{"synced", processruntime.PodStatus{Time: now, StartedAt: now}, v1.ConditionTrue, "", ""},
		{"stopped", processruntime.PodStatus{Time: now, StartedAt: now, Stopped: true, Containers: []processruntime.ContainerStatus{exited}}, v1.ConditionFalse, "PodSandboxNotReady", "pod sandbox is not ready"},
	} {
		api := processruntime.APIStatus(pod, tc.status)
		require.Equal(t, v1.PodReadyToStartContainers, api.Conditions[0].Type)
		c := api.Conditions[0]
		assert.Equal(t, tc.want, c.Status, tc.name)
		assert.Equal(t, tc.reason, c.Reason, tc.name)
		assert.Equal(t, tc.message, c.Message, tc.name)
	}
}
