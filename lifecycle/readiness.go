package lifecycle

import (
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

// readinessNeedsReconcile reports whether pod has readiness gates and a
// Ready condition whose status is not what its containers and gates give
// (podstatus.ReadyCondition), so its worker must sync it (the agent's
// status writer corrects Ready).
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
	st := &pod.Status
	containersReady := podstatus.ContainersReadyCondition(&pod.Spec, st.Phase, st.InitContainerStatuses, st.ContainerStatuses)
	return current.Status != podstatus.ReadyCondition(pod, containersReady).Status
}
