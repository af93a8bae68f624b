package eviction

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/kube/events"
	"github.com/podkit/podkit/internal/podstatus"
)

// Status returns the final-status function the kubelet's eviction
// manager gives a pod it evicts, to hand to the pod workers as
// podworker.KillPodOptions.PodStatusFunc: phase Failed, reason
// events.ReasonEvicted, message, and a DisruptionTarget condition (True, reason
// TerminationByKubelet, the same message) whose transition time is now
// unless the status already has it True. The condition observes the
// generation the status does (status.ObservedGeneration, which the
// syncer's status sets to pod.Generation, as processruntime.APIStatus
// does), as the kubelet's observes the pod's. It is idempotent, as
// statuswriter.WrapSyncer needs. now defaults to time.Now.
func Status(message string, now func() time.Time) func(*v1.PodStatus) {
	if now == nil {
		now = time.Now
	}
	return func(status *v1.PodStatus) {
		status.Phase = v1.PodFailed
		status.Reason = events.ReasonEvicted
		status.Message = message
		podstatus.SetCondition(status, v1.PodCondition{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: status.ObservedGeneration,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonTerminationByKubelet,
			Message:            message,
			LastTransitionTime: metav1.NewTime(now()),
		})
	}
}
