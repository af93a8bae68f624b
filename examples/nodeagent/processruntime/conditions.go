package processruntime

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

// conditions builds the conditions of st, the API status of pod the
// runtime's snapshot s gives, in the kubelet's order: each observes
// pod.Generation, and keeps the transition time of pod.Status's condition
// of its type when its status did not change (else it is now).
//
// The process runtime has no sandbox; PodReadyToStartContainers stands
// for one that exists from the pod's first sync until it stops: False
// before, with the kubelet's reason and message for a pod without a
// sandbox, and False after, with those for a sandbox that is not ready.
func conditions(pod *v1.Pod, st v1.PodStatus, s PodStatus, now time.Time) []v1.PodCondition {
	stamp := func(c v1.PodCondition) v1.PodCondition {
		c.ObservedGeneration = pod.Generation
		c.LastTransitionTime = metav1.NewTime(now)
		for _, old := range pod.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		return c
	}

	sandbox := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
	switch {
	case s.StartedAt.IsZero():
		sandbox.Status, sandbox.Reason, sandbox.Message = v1.ConditionFalse, podstatus.ReasonPodSandboxNotReady, podstatus.MessageNoPodSandbox
	case s.Stopped:
		sandbox.Status, sandbox.Reason, sandbox.Message = v1.ConditionFalse, podstatus.ReasonPodSandboxNotReady, podstatus.MessagePodSandboxNotReady
	}
	initialized := podstatus.InitializedCondition(&pod.Spec, st.Phase, st.InitContainerStatuses, st.ContainerStatuses)
	containersReady := podstatus.ContainersReadyCondition(&pod.Spec, st.Phase, st.InitContainerStatuses, st.ContainerStatuses)
	ready := podstatus.ReadyCondition(pod, containersReady)
	scheduled := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue}
	return []v1.PodCondition{stamp(sandbox), stamp(initialized), stamp(ready), stamp(containersReady), stamp(scheduled)}
}
