package podstatus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

func TestIsTerminal(t *testing.T) {
	for phase, want := range map[v1.PodPhase]bool{
		v1.PodSucceeded: true,
		v1.PodFailed:    true,
		v1.PodPending:   false,
		v1.PodRunning:   false,
		v1.PodUnknown:   false,
		"":              false,
	} {
		assert.Equal(t, want, podstatus.IsTerminal(phase), "phase %q", phase)
	}
}

func TestIsSidecar(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	other := v1.ContainerRestartPolicy("OnFailure")
	assert.True(t, podstatus.IsSidecar(&v1.Container{Name: "proxy", RestartPolicy: &always}))
	assert.False(t, podstatus.IsSidecar(&v1.Container{Name: "migrate"}), "no restart policy: a plain init container")
	assert.False(t, podstatus.IsSidecar(&v1.Container{Name: "x", RestartPolicy: &other}))
	assert.False(t, podstatus.IsSidecar(nil))
}

func TestUnmetReadinessGates(t *testing.T) {
	gates := func(types ...v1.PodConditionType) []v1.PodReadinessGate {
		var out []v1.PodReadinessGate
		for _, c := range types {
			out = append(out, v1.PodReadinessGate{ConditionType: c})
		}
		return out
	}
	pod := &v1.Pod{
		Spec: v1.PodSpec{ReadinessGates: gates("a.io/lb", "a.io/dns", "a.io/warm")},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{
			{Type: "a.io/lb", Status: v1.ConditionTrue},
			{Type: "a.io/dns", Status: v1.ConditionFalse},
			{Type: v1.PodReady, Status: v1.ConditionTrue},
		}},
	}
	assert.Equal(t, []v1.PodConditionType{"a.io/dns", "a.io/warm"}, podstatus.UnmetReadinessGates(pod),
		"a False condition and an absent one are unmet, in spec order")

	pod.Status.Conditions[1].Status = v1.ConditionTrue
	pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: "a.io/warm", Status: v1.ConditionTrue})
	assert.Nil(t, podstatus.UnmetReadinessGates(pod), "all met")
	assert.Nil(t, podstatus.UnmetReadinessGates(&v1.Pod{}), "no gates")
	assert.Nil(t, podstatus.UnmetReadinessGates(nil))
}
