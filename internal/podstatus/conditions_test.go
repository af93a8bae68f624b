package podstatus_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

func cond(t v1.PodConditionType, status v1.ConditionStatus, reason, message string) v1.PodCondition {
	return v1.PodCondition{Type: t, Status: status, Reason: reason, Message: message}
}

func TestInitializedCondition(t *testing.T) {
	always := v1.RestartPolicyAlways
	typ, yes, no := v1.PodInitialized, v1.ConditionTrue, v1.ConditionFalse
	for _, tc := range []struct {
		name          string
		spec          *v1.PodSpec
		phase         v1.PodPhase
		init, regular []v1.ContainerStatus
		want          v1.PodCondition
	}{
		{"no init containers", spec(always, nil, nil, "a"), v1.PodPending, nil, statuses(waitingStatus("a")), cond(typ, yes, "", "")},
		{"no status at all", spec(always, []string{"i"}, nil, "a"), v1.PodPending, nil, nil,
			cond(typ, no, podstatus.ReasonUnknownContainerStatuses, "")},
		{"init running", spec(always, []string{"i", "j"}, nil, "a"), v1.PodPending, statuses(runningInit("i"), waitingStatus("j")), statuses(waitingStatus("a")),
			cond(typ, no, podstatus.ReasonContainersNotInitialized, "containers with incomplete status: [i j]")},
		{"one init unknown, one incomplete", spec(always, []string{"i", "j"}, nil, "a"), v1.PodPending, statuses(runningInit("j")), statuses(waitingStatus("a")),
			cond(typ, no, podstatus.ReasonContainersNotInitialized, "containers with unknown status: [i], containers with incomplete status: [j]")},
		{"init completed (Ready)", spec(always, []string{"i"}, nil, "a"), v1.PodPending, statuses(completedInit("i")), statuses(waitingStatus("a")), cond(typ, yes, "", "")},
		{"init failed", spec(always, []string{"i"}, nil, "a"), v1.PodPending, statuses(exitedStatus("i", 1)), statuses(waitingStatus("a")),
			cond(typ, no, podstatus.ReasonContainersNotInitialized, "containers with incomplete status: [i]")},
		{"sidecar started", spec(always, nil, []string{"s"}, "a"), v1.PodPending, statuses(runningStatus("s")), statuses(waitingStatus("a")), cond(typ, yes, "", "")},
		{"sidecar not started", spec(always, nil, []string{"s"}, "a"), v1.PodPending, statuses(waitingStatus("s")), statuses(waitingStatus("a")),
			cond(typ, no, podstatus.ReasonContainersNotInitialized, "containers with incomplete status: [s]")},
		{"a regular container ran: initialized even if a sidecar restarts", spec(always, nil, []string{"s"}, "a"), v1.PodRunning,
			statuses(crashLoopStatus("s", 1)), statuses(runningStatus("a")), cond(typ, yes, "", "")},
		{"succeeded", spec(v1.RestartPolicyNever, []string{"i"}, nil, "a"), v1.PodSucceeded, statuses(completedInit("i")), statuses(exitedStatus("a", 0)),
			cond(typ, yes, podstatus.ReasonPodCompleted, "")},
		{"succeeded, an init status missing", spec(v1.RestartPolicyNever, []string{"i"}, nil, "a"), v1.PodSucceeded, statuses(), statuses(exitedStatus("a", 0)),
			cond(typ, yes, "", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, podstatus.InitializedCondition(tc.spec, tc.phase, tc.init, tc.regular))
		})
	}
}

func TestContainersReadyAndReadyConditions(t *testing.T) {
	always := v1.RestartPolicyAlways
	typ, yes, no := v1.ContainersReady, v1.ConditionTrue, v1.ConditionFalse
	for _, tc := range []struct {
		name          string
		spec          *v1.PodSpec
		phase         v1.PodPhase
		init, regular []v1.ContainerStatus
		want          v1.PodCondition
	}{
		{"all ready", spec(always, []string{"i"}, nil, "a", "b"), v1.PodRunning, statuses(completedInit("i")), statuses(runningStatus("a"), runningStatus("b")), cond(typ, yes, "", "")},
		{"no status at all", spec(always, nil, nil, "a"), v1.PodPending, nil, nil, cond(typ, no, podstatus.ReasonUnknownContainerStatuses, "")},
		{"one unready, one unknown", spec(always, nil, nil, "a", "b", "c"), v1.PodRunning, nil, statuses(runningStatus("a"), waitingStatus("c")),
			cond(typ, no, podstatus.ReasonContainersNotReady, "containers with unknown status: [b], containers with unready status: [c]")},
		{"a plain init container's readiness does not count", spec(always, []string{"i"}, nil, "a"), v1.PodRunning, statuses(waitingStatus("i")), statuses(runningStatus("a")),
			cond(typ, yes, "", "")},
		{"an unready sidecar counts, listed first", spec(always, nil, []string{"s"}, "a"), v1.PodRunning, statuses(waitingStatus("s")), statuses(waitingStatus("a")),
			cond(typ, no, podstatus.ReasonContainersNotReady, "containers with unready status: [s a]")},
		{"a sidecar without status is unknown", spec(always, nil, []string{"s"}, "a"), v1.PodRunning, nil, statuses(runningStatus("a")),
			cond(typ, no, podstatus.ReasonContainersNotReady, "containers with unknown status: [s]")},
		{"succeeded", spec(v1.RestartPolicyNever, nil, nil, "a"), v1.PodSucceeded, nil, statuses(exitedStatus("a", 0)), cond(typ, no, podstatus.ReasonPodCompleted, "")},
		{"succeeded with a status missing", spec(v1.RestartPolicyNever, nil, nil, "a", "b"), v1.PodSucceeded, nil, statuses(exitedStatus("a", 0)),
			cond(typ, no, podstatus.ReasonContainersNotReady, "containers with unknown status: [b], containers with unready status: [a]")},
		{"failed, even if one still reports ready", spec(always, nil, nil, "a"), v1.PodFailed, nil, statuses(runningStatus("a")), cond(typ, no, podstatus.ReasonPodFailed, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podstatus.ContainersReadyCondition(tc.spec, tc.phase, tc.init, tc.regular)
			assert.Equal(t, tc.want, got)

			ready := podstatus.ReadyCondition(&v1.Pod{Spec: *tc.spec}, got)
			tc.want.Type = v1.PodReady
			assert.Equal(t, tc.want, ready, "Ready follows ContainersReady when there is no gate")
		})
	}

	// Readiness gates are read only once the containers are ready.
	pod := &v1.Pod{
		Spec: v1.PodSpec{ReadinessGates: []v1.PodReadinessGate{{ConditionType: "a.io/lb"}, {ConditionType: "a.io/dns"}}},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{
			{Type: "a.io/dns", Status: v1.ConditionFalse},
		}},
	}
	notReady := cond(typ, no, podstatus.ReasonContainersNotReady, "containers with unready status: [a]")
	assert.Equal(t, cond(v1.PodReady, no, podstatus.ReasonContainersNotReady, "containers with unready status: [a]"), podstatus.ReadyCondition(pod, notReady))
	assert.Equal(t, cond(v1.PodReady, no, podstatus.ReasonReadinessGatesNotReady,
		`corresponding condition of pod readiness gate "a.io/lb" does not exist., the status of pod readiness gate "a.io/dns" is not "True", but False`),
		podstatus.ReadyCondition(pod, cond(typ, yes, "", "")))
	pod.Status.Conditions = []v1.PodCondition{{Type: "a.io/dns", Status: v1.ConditionTrue}, {Type: "a.io/lb", Status: v1.ConditionTrue}}
	assert.Equal(t, cond(v1.PodReady, yes, "", ""), podstatus.ReadyCondition(pod, cond(typ, yes, "", "")))
}

func TestSetCondition(t *testing.T) {
	t1, t2 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	status := &v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t1}}}

	target := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet", LastTransitionTime: t1}
	podstatus.SetCondition(status, target)
	assert.Equal(t, []v1.PodCondition{status.Conditions[0], target}, status.Conditions, "appended")

	again := target
	again.LastTransitionTime, again.Message, again.ObservedGeneration = t2, "new message", 3
	podstatus.SetCondition(status, again)
	assert.Len(t, status.Conditions, 2, "replaced, not added")
	assert.Equal(t, "new message", status.Conditions[1].Message)
	assert.Equal(t, int64(3), status.Conditions[1].ObservedGeneration)
	assert.Equal(t, t1, status.Conditions[1].LastTransitionTime, "the status did not change: its transition time stays")

	flipped := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: t2}
	podstatus.SetCondition(status, flipped)
	assert.Equal(t, flipped, status.Conditions[0], "a changed status takes the new transition time")
}

func TestConditions(t *testing.T) {
	ready := runningStatus("a")
	ready.Ready = true
	pod := &v1.Pod{Spec: *spec(v1.RestartPolicyAlways, nil, nil, "a")}
	pod.Generation = 3
	st := &v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: statuses(ready)}

	got := podstatus.Conditions(pod, st, podstatus.SandboxReady)
	want := []v1.PodCondition{
		{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, ObservedGeneration: 3},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue, ObservedGeneration: 3},
		{Type: v1.PodReady, Status: v1.ConditionTrue, ObservedGeneration: 3},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, ObservedGeneration: 3},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, ObservedGeneration: 3},
	}
	assert.Equal(t, want, got, "the kubelet's order, each observing the generation")

	sandboxOf := func(s podstatus.Sandbox) []v1.PodCondition { return podstatus.Conditions(pod, st, s) }
	assert.Equal(t, v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse, ObservedGeneration: 3,
		Reason: podstatus.ReasonPodSandboxNotReady, Message: podstatus.MessageNoPodSandbox}, sandboxOf(podstatus.SandboxMissing)[0])
	assert.Equal(t, podstatus.MessagePodSandboxNotReady, sandboxOf(podstatus.SandboxNotReady)[0].Message)
	noSandbox := sandboxOf(podstatus.NoSandboxCondition)
	assert.Len(t, noSandbox, 4)
	assert.Equal(t, v1.PodInitialized, noSandbox[0].Type, "a runtime without sandboxes reports no such condition")

	// Ready follows ContainersReady and the readiness gates.
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	got = podstatus.Conditions(pod, st, podstatus.NoSandboxCondition)
	assert.Equal(t, podstatus.ReasonReadinessGatesNotReady, got[1].Reason)
	assert.Equal(t, v1.ConditionTrue, got[2].Status)
}

func TestStampTransitions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	previous := []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
	}
	conds := []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue},
	}
	now := t0.Add(time.Minute)
	podstatus.StampTransitions(conds, previous, now)
	assert.True(t, conds[0].LastTransitionTime.Time.Equal(now), "Ready changed: now")
	assert.True(t, conds[1].LastTransitionTime.Time.Equal(t0), "PodScheduled did not: its time is kept")
	assert.True(t, conds[2].LastTransitionTime.Time.Equal(now), "a new condition: now")
}
