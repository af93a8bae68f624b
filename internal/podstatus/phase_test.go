package podstatus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

func TestShouldRestart(t *testing.T) {
	for _, tc := range []struct {
		policy   v1.RestartPolicy
		init     bool
		exitCode int32
		want     bool
	}{
		{v1.RestartPolicyAlways, false, 0, true},
		{v1.RestartPolicyAlways, false, 1, true},
		{"", false, 0, true},
		{v1.RestartPolicyOnFailure, false, 0, false},
		{v1.RestartPolicyOnFailure, false, 2, true},
		{v1.RestartPolicyNever, false, 0, false},
		{v1.RestartPolicyNever, false, podstatus.ExitCodeUnknown, false},
		{v1.RestartPolicyAlways, true, 0, false},
		{v1.RestartPolicyAlways, true, 1, true},
		{"", true, 0, false},
		{v1.RestartPolicyOnFailure, true, 0, false},
		{v1.RestartPolicyOnFailure, true, podstatus.ExitCodeUnknown, true},
		{v1.RestartPolicyNever, true, 1, false},
	} {
		assert.Equal(t, tc.want, podstatus.ShouldRestart(tc.policy, tc.init, tc.exitCode),
			"policy %q, init %v, exit code %d", tc.policy, tc.init, tc.exitCode)
	}
}

// Container statuses for the tests, each named by its constructor's
// argument.
func runningStatus(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}, Ready: true, Started: new(true)}
}

func exitedStatus(name string, code int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}, Started: new(false)}
}

// runningInit is a regular init container that runs: not Ready (yet), as
// the kubelet reports it.
func runningInit(name string) v1.ContainerStatus {
	st := runningStatus(name)
	st.Ready = false
	return st
}

// completedInit is a regular init container that exited 0: Ready, as the
// kubelet reports it.
func completedInit(name string) v1.ContainerStatus {
	st := exitedStatus(name, 0)
	st.Ready = true
	return st
}

func waitingStatus(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}, Started: new(false)}
}

// crashLoopStatus waits to restart after exiting with code.
func crashLoopStatus(name string, code int32) v1.ContainerStatus {
	st := waitingStatus(name)
	st.State.Waiting.Reason = "CrashLoopBackOff"
	st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: code}
	return st
}

func spec(policy v1.RestartPolicy, init []string, sidecars []string, containers ...string) *v1.PodSpec {
	s := &v1.PodSpec{RestartPolicy: policy}
	for _, n := range sidecars {
		s.InitContainers = append(s.InitContainers, v1.Container{Name: n, RestartPolicy: new(v1.ContainerRestartPolicyAlways)})
	}
	for _, n := range init {
		s.InitContainers = append(s.InitContainers, v1.Container{Name: n})
	}
	for _, n := range containers {
		s.Containers = append(s.Containers, v1.Container{Name: n})
	}
	return s
}

func statuses(s ...v1.ContainerStatus) []v1.ContainerStatus { return s }

func TestPhase(t *testing.T) {
	always, onFailure, never := v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever
	for _, tc := range []struct {
		name          string
		spec          *v1.PodSpec
		init, regular []v1.ContainerStatus
		stopped       bool
		want          v1.PodPhase
	}{
		{"no status yet", spec(always, nil, nil, "a"), nil, nil, false, v1.PodPending},
		{"created, not started", spec(always, nil, nil, "a"), nil, statuses(waitingStatus("a")), false, v1.PodPending},
		{"running", spec(always, nil, nil, "a"), nil, statuses(runningStatus("a")), false, v1.PodRunning},
		{"one runs, one waits to start", spec(always, nil, nil, "a", "b"), nil, statuses(runningStatus("a"), waitingStatus("b")), false, v1.PodPending},
		{"one runs, one has no status", spec(always, nil, nil, "a", "b"), nil, statuses(runningStatus("a")), false, v1.PodPending},
		{"one runs, one crash-loops", spec(always, nil, nil, "a", "b"), nil, statuses(runningStatus("a"), crashLoopStatus("b", 1)), false, v1.PodRunning},
		{"Always, all exited 0", spec(always, nil, nil, "a"), nil, statuses(exitedStatus("a", 0)), false, v1.PodRunning},
		{"unset policy, all exited 0", spec("", nil, nil, "a"), nil, statuses(exitedStatus("a", 0)), false, v1.PodRunning},
		{"OnFailure, all exited 0", spec(onFailure, nil, nil, "a", "b"), nil, statuses(exitedStatus("a", 0), exitedStatus("b", 0)), false, v1.PodSucceeded},
		{"OnFailure, one failed", spec(onFailure, nil, nil, "a", "b"), nil, statuses(exitedStatus("a", 0), exitedStatus("b", 2)), false, v1.PodRunning},
		{"OnFailure, crash-looping", spec(onFailure, nil, nil, "a"), nil, statuses(crashLoopStatus("a", 2)), false, v1.PodRunning},
		{"Never, one runs, one failed", spec(never, nil, nil, "a", "b"), nil, statuses(exitedStatus("a", 2), runningStatus("b")), false, v1.PodRunning},
		{"Never, all done, one failed", spec(never, nil, nil, "a", "b"), nil, statuses(exitedStatus("a", 2), exitedStatus("b", 0)), false, v1.PodFailed},
		{"Never, all succeeded", spec(never, nil, nil, "a", "b"), nil, statuses(exitedStatus("a", 0), exitedStatus("b", 0)), false, v1.PodSucceeded},
		{"init has no status", spec(always, []string{"i"}, nil, "a"), nil, statuses(waitingStatus("a")), false, v1.PodPending},
		{"init running", spec(always, []string{"i"}, nil, "a"), statuses(runningInit("i")), statuses(waitingStatus("a")), false, v1.PodPending},
		{"init failed, Never", spec(never, []string{"i"}, nil, "a"), statuses(exitedStatus("i", 1)), statuses(waitingStatus("a")), false, v1.PodFailed},
		{"init failed, Always", spec(always, []string{"i"}, nil, "a"), statuses(exitedStatus("i", 1)), statuses(waitingStatus("a")), false, v1.PodPending},
		{"init crash-looping, OnFailure", spec(onFailure, []string{"i"}, nil, "a"), statuses(crashLoopStatus("i", 1)), statuses(waitingStatus("a")), false, v1.PodPending},
		{"init done, main runs", spec(never, []string{"i"}, nil, "a"), statuses(exitedStatus("i", 0)), statuses(runningStatus("a")), false, v1.PodRunning},
		{"sidecar not started", spec(always, nil, []string{"s"}, "a"), statuses(waitingStatus("s")), statuses(waitingStatus("a")), false, v1.PodPending},
		{"sidecar and main run", spec(always, nil, []string{"s"}, "a"), statuses(runningStatus("s")), statuses(runningStatus("a")), false, v1.PodRunning},
		{"sidecar waits to start after main started", spec(always, nil, []string{"s"}, "a"), statuses(waitingStatus("s")), statuses(runningStatus("a")), false, v1.PodPending},
		{"sidecar running unstarted after main ran", spec(always, nil, []string{"s"}, "a"),
			statuses(v1.ContainerStatus{Name: "s", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}), statuses(runningStatus("a")), false, v1.PodRunning},
		{"Never, main done, sidecar runs", spec(never, nil, []string{"s"}, "a"), statuses(runningStatus("s")), statuses(exitedStatus("a", 0)), false, v1.PodRunning},
		{"Never, main done, sidecar stopped", spec(never, nil, []string{"s"}, "a"), statuses(exitedStatus("s", 137)), statuses(exitedStatus("a", 0)), false, v1.PodSucceeded},
		{"stopped, all exited 0", spec(always, nil, nil, "a"), nil, statuses(exitedStatus("a", 0)), true, v1.PodSucceeded},
		{"stopped, killed", spec(always, nil, nil, "a"), nil, statuses(exitedStatus("a", 137)), true, v1.PodFailed},
		{"stopped, never started", spec(always, nil, nil, "a"), nil, statuses(waitingStatus("a")), true, v1.PodFailed},
		{"stopped, no status", spec(always, nil, nil, "a"), nil, nil, true, v1.PodFailed},
		{"stopped while running", spec(always, nil, nil, "a"), nil, statuses(runningStatus("a")), true, v1.PodFailed},
		{"stopped during init", spec(always, []string{"i"}, nil, "a"), statuses(exitedStatus("i", 137)), statuses(waitingStatus("a")), true, v1.PodFailed},
		{"stopped, crash-looping", spec(onFailure, nil, nil, "a"), nil, statuses(crashLoopStatus("a", 0)), true, v1.PodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, podstatus.Phase(tc.spec, tc.init, tc.regular, tc.stopped))
		})
	}
}
