package processruntime

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

// conditions builds the conditions of st, the API status of pod the
// runtime's snapshot s gives, by podstatus.Conditions (the one assembly of
// podkit's runtimes), each keeping the transition time of pod.Status's
// condition of its type when its status did not change (else it is now).
//
// The process runtime has no sandbox; PodReadyToStartContainers stands
// for one that exists from the pod's first sync until it stops: False
// before, with the kubelet's reason and message for a pod without a
// sandbox, and False after, with those for a sandbox that is not ready.
func conditions(pod *v1.Pod, st v1.PodStatus, s PodStatus, now time.Time) []v1.PodCondition {
	sandbox := podstatus.SandboxReady
	switch {
	case s.StartedAt.IsZero():
		sandbox = podstatus.SandboxMissing
	case s.Stopped:
		sandbox = podstatus.SandboxNotReady
	}
	conds := podstatus.Conditions(pod, &st, sandbox)
	podstatus.StampTransitions(conds, pod.Status.Conditions, now)
	return conds
}
