package lifecycle

import (
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

// readinessNeedsReconcile reports whether pod has readiness gates and a
// Ready condition whose status is not what its containers and gates give,
// so its worker must sync it (the agent's status writer corrects Ready).
func readinessNeedsReconcile(pod *v1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	var current *v1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			current = &pod.Status.Conditions[i]
		}
	}
	if current == nil {
		return false
	}
	want := v1.ConditionTrue
	if !containersReady(pod) || len(podstatus.UnmetReadinessGates(pod)) > 0 {
		want = v1.ConditionFalse
	}
	return current.Status != want
}

// containersReady reports whether every container that must be ready (the
// regular ones and the sidecars) has a ready status, in a pod that is not
// in a terminal phase.
func containersReady(pod *v1.Pod) bool {
	if podstatus.IsTerminal(pod.Status.Phase) {
		return false
	}
	ready := map[string]bool{}
	for _, s := range pod.Status.InitContainerStatuses {
		ready[s.Name] = s.Ready
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; podstatus.IsSidecar(c) && !ready[c.Name] {
			return false
		}
	}
	ready = map[string]bool{}
	for _, s := range pod.Status.ContainerStatuses {
		ready[s.Name] = s.Ready
	}
	for _, c := range pod.Spec.Containers {
		if !ready[c.Name] {
			return false
		}
	}
	return true
}
