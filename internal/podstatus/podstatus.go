// Package podstatus holds the rules that read what a pod's status says,
// and the container rule they depend on, each written once for podkit and
// its examples: whether a phase is terminal, which init containers are
// sidecars (whose readiness counts like a regular container's), and which
// readiness gates a pod's conditions leave unmet.
//
// The functions are pure and safe for concurrent use; they never modify
// what they are given.
package podstatus

import v1 "k8s.io/api/core/v1"

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
	if pod == nil {
		return nil
	}
	var unmet []v1.PodConditionType
	for _, gate := range pod.Spec.ReadinessGates {
		met := false
		for _, c := range pod.Status.Conditions {
			if c.Type == gate.ConditionType && c.Status == v1.ConditionTrue {
				met = true
				break
			}
		}
		if !met {
			unmet = append(unmet, gate.ConditionType)
		}
	}
	return unmet
}
