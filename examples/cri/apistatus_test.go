package cri_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podkit/podkit/examples/cri"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sandbox is a runtime sandbox status made at t0+at.
func sandbox(id string, ready bool, at time.Duration, ips ...string) *runtimeapi.PodSandboxStatus {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	sb := &runtimeapi.PodSandboxStatus{Id: id, State: st, CreatedAt: t0.Add(at).UnixNano(), Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns"}}
	if len(ips) > 0 {
		sb.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: ips[0]}
		for _, ip := range ips[1:] {
			sb.Network.AdditionalIps = append(sb.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	return sb
}

// ctr is a container instance; exit < 0 means running.
func ctr(name string, attempt uint32, state runtimeapi.ContainerState, exit int32, at time.Duration) cri.ContainerStatus {
	return cri.ContainerStatus{SandboxID: "sb", ContainerStatus: &runtimeapi.ContainerStatus{
		Id:         name + "-" + string(rune('0'+attempt)),
		Metadata:   &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		State:      state,
		ExitCode:   exit,
		CreatedAt:  t0.Add(at).UnixNano(),
		StartedAt:  t0.Add(at + time.Second).UnixNano(),
		FinishedAt: t0.Add(at + 2*time.Second).UnixNano(),
		ImageRef:   "sha256:abc",
	}}
}

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

func TestAPIStatusPhase(t *testing.T) {
	two := func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "b", Image: testImage})
	}
	for name, tc := range map[string]struct {
		mutate     []func(*v1.Pod)
		ready      bool
		containers []cri.ContainerStatus
		final      bool
		want       v1.PodPhase
	}{
		"nothing yet":                    {ready: true, want: v1.PodPending},
		"running":                        {ready: true, containers: []cri.ContainerStatus{ctr("app", 0, running, 0, 0)}, want: v1.PodRunning},
		"created, not started":           {ready: true, containers: []cri.ContainerStatus{ctr("app", 0, created, 0, 0)}, want: v1.PodPending},
		"one runs, one not started":      {mutate: []func(*v1.Pod){two}, ready: true, containers: []cri.ContainerStatus{ctr("app", 0, running, 0, 0), ctr("b", 0, created, 0, 0)}, want: v1.PodPending},
		"Always, exited 0":               {ready: true, containers: []cri.ContainerStatus{ctr("app", 0, exited, 0, 0)}, want: v1.PodRunning},
		"OnFailure, one failed":          {mutate: []func(*v1.Pod){withPolicy(v1.RestartPolicyOnFailure)}, ready: true, containers: []cri.ContainerStatus{ctr("app", 0, exited, 2, 0)}, want: v1.PodRunning},
		"Never, one runs, one failed":    {mutate: []func(*v1.Pod){withPolicy(v1.RestartPolicyNever), two}, ready: true, containers: []cri.ContainerStatus{ctr("app", 0, exited, 2, 0), ctr("b", 0, running, 0, 0)}, want: v1.PodRunning},
		"Never, all done, one failed":    {mutate: []func(*v1.Pod){withPolicy(v1.RestartPolicyNever), two}, ready: true, containers: []cri.ContainerStatus{ctr("app", 0, exited, 2, 0), ctr("b", 0, exited, 0, 0)}, want: v1.PodFailed},
		"Never, all succeeded":           {mutate: []func(*v1.Pod){withPolicy(v1.RestartPolicyNever), two}, ready: true, containers: []cri.ContainerStatus{ctr("app", 0, exited, 0, 0), ctr("b", 0, exited, 0, 0)}, want: v1.PodSucceeded},
		"Never, sandbox gone":            {mutate: []func(*v1.Pod){withPolicy(v1.RestartPolicyNever)}, containers: []cri.ContainerStatus{ctr("app", 0, exited, 0, 0)}, want: v1.PodSucceeded},
		"Never, sandbox gone while runs": {mutate: []func(*v1.Pod){withPolicy(v1.RestartPolicyNever)}, containers: []cri.ContainerStatus{ctr("app", 0, unknown, 0, 0)}, want: v1.PodFailed},
		"init running":                   {mutate: []func(*v1.Pod){withInit("i")}, ready: true, containers: []cri.ContainerStatus{ctr("i", 0, running, 0, 0)}, want: v1.PodPending},
		"init failed, Never":             {mutate: []func(*v1.Pod){withInit("i"), withPolicy(v1.RestartPolicyNever)}, ready: true, containers: []cri.ContainerStatus{ctr("i", 0, exited, 1, 0)}, want: v1.PodFailed},
		"init failed, Always":            {mutate: []func(*v1.Pod){withInit("i")}, ready: true, containers: []cri.ContainerStatus{ctr("i", 0, exited, 1, 0)}, want: v1.PodPending},
		"final, Always, killed":          {ready: true, final: true, containers: []cri.ContainerStatus{ctr("app", 0, exited, 137, 0)}, want: v1.PodFailed},
		"final, Always, exited 0":        {ready: true, final: true, containers: []cri.ContainerStatus{ctr("app", 0, exited, 0, 0)}, want: v1.PodSucceeded},
		"final, never created":           {ready: true, final: true, want: v1.PodFailed},
		"final, init never done":         {mutate: []func(*v1.Pod){withInit("i")}, final: true, containers: []cri.ContainerStatus{ctr("i", 0, exited, 137, 0)}, want: v1.PodFailed},
	} {
		t.Run(name, func(t *testing.T) {
			pod := newPod("p", tc.mutate...)
			st := &cri.PodStatus{UID: pod.UID, Sandboxes: []*runtimeapi.PodSandboxStatus{sandbox("sb", tc.ready, 0)}, Containers: tc.containers}
			api := st.APIStatus(pod)
			if tc.final {
				api = st.FinalAPIStatus(pod)
			}
			assert.Equal(t, tc.want, api.Phase)
		})
	}
}

func TestAPIStatusFields(t *testing.T) {
	pod := newPod("p", withInit("i"))
	st := &cri.PodStatus{
		UID:         pod.UID,
		RuntimeName: "containerd",
		HostIPs:     []string{"192.0.2.1", "2001:db8::1"},
		Sandboxes: []*runtimeapi.PodSandboxStatus{
			sandbox("new", true, time.Minute, "10.1.0.5", "fd00::5"),
			sandbox("old", false, 0, "10.1.0.4"),
		},
		Containers: []cri.ContainerStatus{
			ctr("app", 3, running, 0, 50*time.Second),
			ctr("app", 2, exited, 137, 40*time.Second),
			ctr("i", 0, exited, 0, 30*time.Second),
		},
	}
	api := st.APIStatus(pod)
	assert.Equal(t, "10.1.0.5", api.PodIP)
	assert.Equal(t, []v1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}}, api.PodIPs)
	assert.Equal(t, "192.0.2.1", api.HostIP)
	require.NotNil(t, api.StartTime)
	assert.True(t, api.StartTime.Time.Equal(t0), "the pod started with its first sandbox")

	require.Len(t, api.ContainerStatuses, 1)
	cs := api.ContainerStatuses[0]
	assert.Equal(t, "containerd://app-3", cs.ContainerID)
	assert.Equal(t, "sha256:abc", cs.ImageID)
	assert.Equal(t, int32(3), cs.RestartCount)
	require.NotNil(t, cs.State.Running)
	assert.True(t, cs.State.Running.StartedAt.Time.Equal(t0.Add(51*time.Second)))
	require.NotNil(t, cs.LastTerminationState.Terminated)
	assert.Equal(t, int32(137), cs.LastTerminationState.Terminated.ExitCode)
	assert.Equal(t, "Error", cs.LastTerminationState.Terminated.Reason)
	assert.True(t, cs.Ready)
	assert.True(t, *cs.Started)

	require.Len(t, api.InitContainerStatuses, 1)
	assert.Equal(t, "Completed", api.InitContainerStatuses[0].State.Terminated.Reason)
	assert.Equal(t, []v1.PodCondition{
		{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue},
		{Type: v1.PodReady, Status: v1.ConditionTrue},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	}, api.Conditions, "podstatus.Conditions: the kubelet's conditions, in its order, as the process runtime reports them")

	// Host network: the pod has the node's addresses.
	pod.Spec.HostNetwork = true
	assert.Equal(t, "192.0.2.1", st.APIStatus(pod).PodIP)

	// Not ready while the init container runs; regular containers wait.
	pod = newPod("p", withInit("i"))
	st = &cri.PodStatus{UID: pod.UID, Sandboxes: []*runtimeapi.PodSandboxStatus{sandbox("sb", true, 0)}, Containers: []cri.ContainerStatus{ctr("i", 0, running, 0, 0)}}
	api = st.APIStatus(pod)
	assert.Equal(t, cri.ReasonPodInitializing, api.ContainerStatuses[0].State.Waiting.Reason)
	assert.Equal(t, "cri://i-0", api.InitContainerStatuses[0].ContainerID, "the default runtime name")
	assert.Contains(t, api.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse,
		Reason: "ContainersNotReady", Message: "containers with unready status: [app]"})
	assert.Contains(t, api.Conditions, v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse,
		Reason: "ContainersNotInitialized", Message: "containers with incomplete status: [i]"})
	assert.False(t, api.InitContainerStatuses[0].Ready, "a running init container is not ready: it has not completed")

	// An unknown state is reported as such.
	st.Containers = []cri.ContainerStatus{ctr("i", 0, unknown, 0, 0)}
	assert.Equal(t, cri.ReasonContainerStatusUnknown, st.APIStatus(pod).InitContainerStatuses[0].State.Waiting.Reason)
}

func TestNothingRunning(t *testing.T) {
	e := newEnv(t)
	assert.False(t, e.syncer.NothingRunning(nil), "no status shows nothing")
	assert.True(t, e.syncer.NothingRunning(&cri.PodStatus{}))
	assert.False(t, e.syncer.NothingRunning(&cri.PodStatus{Sandboxes: []*runtimeapi.PodSandboxStatus{sandbox("sb", true, 0)}}))
	assert.False(t, e.syncer.NothingRunning(&cri.PodStatus{Containers: []cri.ContainerStatus{ctr("a", 0, unknown, 0, 0)}}))
	assert.True(t, e.syncer.NothingRunning(&cri.PodStatus{
		Sandboxes:  []*runtimeapi.PodSandboxStatus{sandbox("sb", false, 0)},
		Containers: []cri.ContainerStatus{ctr("a", 0, exited, 0, 0), ctr("b", 0, created, 0, 0)},
	}))
}

// TestAPIStatusAsTheKubelet: the details the kubelet 1.37 gives a pod's
// status, from the runtime's view alone.
func TestAPIStatusAsTheKubelet(t *testing.T) {
	pod := newPod("p", withInit("i"))
	pod.Generation = 4
	completed := &cri.PodStatus{UID: pod.UID, Sandboxes: []*runtimeapi.PodSandboxStatus{sandbox("sb", true, 0)},
		Containers: []cri.ContainerStatus{ctr("app", 0, running, 0, 10*time.Second), ctr("i", 0, exited, 0, 0)}}

	api := completed.APIStatus(pod)
	assert.Equal(t, int64(4), api.ObservedGeneration)
	for _, c := range api.Conditions {
		assert.Equal(t, int64(4), c.ObservedGeneration, "condition %s observes the pod's generation", c.Type)
	}
	assert.True(t, api.InitContainerStatuses[0].Ready, "an init container is ready once it exited 0")
	assert.Equal(t, v1.PodRunning, api.Phase)

	// The init container's instance is gone (garbage-collected) once the
	// app was created: it shows as completed, and the pod stays
	// initialized.
	gone := &cri.PodStatus{UID: pod.UID, Sandboxes: completed.Sandboxes, Containers: completed.Containers[:1]}
	api = gone.APIStatus(pod)
	require.NotNil(t, api.InitContainerStatuses[0].State.Terminated)
	assert.Equal(t, cri.MessageInitContainerGone, api.InitContainerStatuses[0].State.Terminated.Message)
	assert.Equal(t, v1.PodRunning, api.Phase)
	assert.Contains(t, api.Conditions, v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue, ObservedGeneration: 4})

	// PodReadyToStartContainers says why it is False.
	noSandbox := &cri.PodStatus{UID: pod.UID}
	assert.Contains(t, noSandbox.APIStatus(pod).Conditions, v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse,
		Reason: "PodSandboxNotReady", Message: "no pod sandbox exists", ObservedGeneration: 4})
	stopped := &cri.PodStatus{UID: pod.UID, Sandboxes: []*runtimeapi.PodSandboxStatus{sandbox("sb", false, 0)}}
	assert.Contains(t, stopped.APIStatus(pod).Conditions, v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse,
		Reason: "PodSandboxNotReady", Message: "pod sandbox is not ready", ObservedGeneration: 4})

	// A readiness gate holds Ready back once the containers are ready.
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	api = completed.APIStatus(pod)
	assert.Contains(t, api.Conditions, v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue, ObservedGeneration: 4})
	assert.Contains(t, api.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, ObservedGeneration: 4,
		Reason: "ReadinessGatesNotReady", Message: `corresponding condition of pod readiness gate "example.com/lb" does not exist.`})
}
