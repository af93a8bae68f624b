package podstatus

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// IsTerminal reports whether phase is terminal: Succeeded or Failed. A pod
// in a terminal phase runs no container again.
func IsTerminal(phase v1.PodPhase) bool {
	return phase == v1.PodSucceeded || phase == v1.PodFailed
}

// IsSidecar reports whether c, an init container, is a sidecar (a
// restartable init container): its restartPolicy is Always, so it starts
// in init order, keeps running next to the regular containers, and its
// readiness counts toward the pod's. A nil container is not a sidecar.
func IsSidecar(c *v1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// UnmetReadinessGates returns, in spec order, the condition types of pod's
// readiness gates that its status conditions do not hold as True (absent
// counts as unmet). A pod whose gates are all met, or that has none, gives
// nil; so does a nil pod. The slice is new and the caller's.
func UnmetReadinessGates(pod *v1.Pod) []v1.PodConditionType {
	var unmet []v1.PodConditionType
	eachUnmetGate(pod, func(gate v1.PodConditionType, _ *v1.PodCondition) {
		unmet = append(unmet, gate)
	})
	return unmet
}

// UnmetReadinessGateMessages returns, for the same gates as
// UnmetReadinessGates and in the same order, the kubelet's message for
// each: that the gate's condition does not exist, or that its status is
// not "True". The kubelet joins them with ", " as the message of a Ready
// condition that is False with reason ReadinessGatesNotReady.
func UnmetReadinessGateMessages(pod *v1.Pod) []string {
	var msgs []string
	eachUnmetGate(pod, func(gate v1.PodConditionType, c *v1.PodCondition) {
		if c == nil {
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(gate)))
			return
		}
		msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(gate), c.Status))
	})
	return msgs
}

// eachUnmetGate calls f, in spec order, for each readiness gate of pod that
// its conditions do not hold as True, with the gate's condition (the last
// of its type) or nil when there is none.
func eachUnmetGate(pod *v1.Pod, f func(gate v1.PodConditionType, c *v1.PodCondition)) {
	if pod == nil {
		return
	}
	for _, gate := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == gate.ConditionType {
				found = &pod.Status.Conditions[i]
			}
		}
		if found == nil || found.Status != v1.ConditionTrue {
			f(gate.ConditionType, found)
		}
	}
}
