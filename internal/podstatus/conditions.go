package podstatus

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons and messages of the conditions a node agent sets, as the kubelet
// gives them.
const (
	// ReasonPodCompleted: the pod succeeded (Initialized True,
	// ContainersReady and Ready False).
	ReasonPodCompleted = "PodCompleted"
	// ReasonPodFailed: the pod failed (ContainersReady and Ready False).
	ReasonPodFailed = "PodFailed"
	// ReasonContainersNotReady: a container that must be ready is not.
	ReasonContainersNotReady = "ContainersNotReady"
	// ReasonContainersNotInitialized: an init container has not completed.
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	// ReasonReadinessGatesNotReady: the containers are ready, a readiness
	// gate is not.
	ReasonReadinessGatesNotReady = "ReadinessGatesNotReady"
	// ReasonUnknownContainerStatuses: no container has a status at all.
	ReasonUnknownContainerStatuses = "UnknownContainerStatuses"
	// ReasonPodSandboxNotReady: PodReadyToStartContainers is False, with
	// MessageNoPodSandbox or MessagePodSandboxNotReady.
	ReasonPodSandboxNotReady = "PodSandboxNotReady"
	// MessageNoPodSandbox: the pod has no sandbox (yet, or any more).
	MessageNoPodSandbox = "no pod sandbox exists"
	// MessagePodSandboxNotReady: the pod's sandbox exists and is not ready
	// (it was stopped).
	MessagePodSandboxNotReady = "pod sandbox is not ready"
)

// InitializedCondition returns the pod's Initialized condition (type,
// status, reason and message; no time, no generation), derived from its
// containers' API statuses by the kubelet's rule: True with reason
// PodCompleted when the pod succeeded and every init container has a
// status; True when a regular container runs or exited (the pod was
// initialized, even if a sidecar restarts since); False with reason
// ContainersNotInitialized while an init container has no status or has
// not completed (a regular one is not Ready, a sidecar has not Started),
// naming them; True otherwise. A pod with init containers and no status at
// all gets False with reason UnknownContainerStatuses.
func InitializedCondition(spec *v1.PodSpec, phase v1.PodPhase, initStatuses, statuses []v1.ContainerStatus) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	if initStatuses == nil && statuses == nil && len(spec.InitContainers) > 0 {
		return notTrue(c, ReasonUnknownContainerStatuses, "")
	}
	var unknown, incomplete []string
	for i := range spec.InitContainers {
		ic := &spec.InitContainers[i]
		st, ok := statusOf(initStatuses, ic.Name)
		switch {
		case !ok:
			unknown = append(unknown, ic.Name)
		case IsSidecar(ic) && (st.Started == nil || !*st.Started), !IsSidecar(ic) && !st.Ready:
			incomplete = append(incomplete, ic.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		c.Reason = ReasonPodCompleted
		return c
	}
	for _, st := range statuses {
		if _, regular := containerOf(spec.Containers, st.Name); regular && (st.State.Running != nil || st.State.Terminated != nil) {
			return c
		}
	}
	if msg := listMessage("incomplete", unknown, incomplete); msg != "" {
		return notTrue(c, ReasonContainersNotInitialized, msg)
	}
	return c
}

// ContainersReadyCondition returns the pod's ContainersReady condition
// (type, status, reason and message; no time, no generation) by the
// kubelet's rule over the containers whose readiness counts, the sidecars
// (in spec order) and then the regular containers: False with reason
// PodCompleted when the pod succeeded and each of them has a status, or
// PodFailed when it failed; False with reason ContainersNotReady while one
// has no status or is not Ready, naming them; True otherwise. No status at
// all gives False with reason UnknownContainerStatuses.
func ContainersReadyCondition(spec *v1.PodSpec, phase v1.PodPhase, initStatuses, statuses []v1.ContainerStatus) v1.PodCondition {
	c := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
	if initStatuses == nil && statuses == nil {
		return notTrue(c, ReasonUnknownContainerStatuses, "")
	}
	var unknown, unready []string
	check := func(name string, list []v1.ContainerStatus) {
		st, ok := statusOf(list, name)
		switch {
		case !ok:
			unknown = append(unknown, name)
		case !st.Ready:
			unready = append(unready, name)
		}
	}
	for i := range spec.InitContainers {
		if IsSidecar(&spec.InitContainers[i]) {
			check(spec.InitContainers[i].Name, initStatuses)
		}
	}
	for i := range spec.Containers {
		check(spec.Containers[i].Name, statuses)
	}
	switch {
	case phase == v1.PodSucceeded && len(unknown) == 0:
		return notTrue(c, ReasonPodCompleted, "")
	case phase == v1.PodFailed:
		return notTrue(c, ReasonPodFailed, "")
	}
	if msg := listMessage("unready", unknown, unready); msg != "" {
		return notTrue(c, ReasonContainersNotReady, msg)
	}
	return c
}

// ReadyCondition returns the pod's Ready condition given its
// ContainersReady condition, by the kubelet's rule: the status, reason and
// message of containersReady while that is not True; then False with
// reason ReadinessGatesNotReady while a readiness gate of pod is unmet in
// pod.Status.Conditions (the message joins UnmetReadinessGateMessages);
// True otherwise. Neither time nor generation is set.
func ReadyCondition(pod *v1.Pod, containersReady v1.PodCondition) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
	if containersReady.Status != v1.ConditionTrue {
		c.Status, c.Reason, c.Message = containersReady.Status, containersReady.Reason, containersReady.Message
		return c
	}
	if msgs := UnmetReadinessGateMessages(pod); len(msgs) > 0 {
		return notTrue(c, ReasonReadinessGatesNotReady, strings.Join(msgs, ", "))
	}
	return c
}

// notTrue returns c False with reason and message.
func notTrue(c v1.PodCondition, reason, message string) v1.PodCondition {
	c.Status, c.Reason, c.Message = v1.ConditionFalse, reason, message
	return c
}

// listMessage is the kubelet's message naming containers of unknown
// status and those in state (e.g. "containers with unready status: [a
// b]"), the unknown ones first; "" when both lists are empty.
func listMessage(state string, unknown, others []string) string {
	var parts []string
	if len(unknown) > 0 {
		parts = append(parts, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(others) > 0 {
		parts = append(parts, fmt.Sprintf("containers with %s status: %s", state, others))
	}
	return strings.Join(parts, ", ")
}

// containerOf returns the container named name in list.
func containerOf(list []v1.Container, name string) (*v1.Container, bool) {
	for i := range list {
		if list[i].Name == name {
			return &list[i], true
		}
	}
	return nil, false
}

// SetCondition puts cond into status: in place of the condition of its
// type, whose transition time it keeps when the status (True, False,
// Unknown) did not change, or appended when there is none. It is
// idempotent, as a final-status function handed to the pod workers must
// be.
func SetCondition(status *v1.PodStatus, cond v1.PodCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type != cond.Type {
			continue
		}
		if status.Conditions[i].Status == cond.Status {
			cond.LastTransitionTime = status.Conditions[i].LastTransitionTime
		}
		status.Conditions[i] = cond
		return
	}
	status.Conditions = append(status.Conditions, cond)
}

// Sandbox is what a runtime knows of a pod's sandbox, the input of the
// PodReadyToStartContainers condition (Conditions).
type Sandbox int

const (
	// NoSandboxCondition: the runtime has no notion of a sandbox (a
	// virtual-kubelet backend); the condition is left out.
	NoSandboxCondition Sandbox = iota
	// SandboxMissing: the pod has no sandbox, yet or any more.
	SandboxMissing
	// SandboxNotReady: the pod's sandbox exists and is not ready (it was
	// stopped).
	SandboxNotReady
	// SandboxReady: the pod's sandbox is ready to start containers.
	SandboxReady
)

// Conditions returns the conditions a node agent reports for pod whose
// status st already has its phase and container statuses, in the
// kubelet's order: PodReadyToStartContainers (from sandbox; left out for
// NoSandboxCondition), Initialized, Ready, ContainersReady, and
// PodScheduled (True: the pod is on the node). Each observes
// pod.Generation and has no transition time; StampTransitions sets those.
// It is the one assembly of the rules above, so every runtime of podkit
// reports the same conditions. Neither pod nor st is modified.
func Conditions(pod *v1.Pod, st *v1.PodStatus, sandbox Sandbox) []v1.PodCondition {
	var out []v1.PodCondition
	if sandbox != NoSandboxCondition {
		c := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
		switch sandbox {
		case SandboxMissing:
			c = notTrue(c, ReasonPodSandboxNotReady, MessageNoPodSandbox)
		case SandboxNotReady:
			c = notTrue(c, ReasonPodSandboxNotReady, MessagePodSandboxNotReady)
		}
		out = append(out, c)
	}
	containersReady := ContainersReadyCondition(&pod.Spec, st.Phase, st.InitContainerStatuses, st.ContainerStatuses)
	out = append(out,
		InitializedCondition(&pod.Spec, st.Phase, st.InitContainerStatuses, st.ContainerStatuses),
		ReadyCondition(pod, containersReady),
		containersReady,
		v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	)
	for i := range out {
		out[i].ObservedGeneration = pod.Generation
	}
	return out
}

// StampTransitions sets the transition time of each of conds: that of the
// condition of its type in previous (a pod's last reported conditions)
// when its status is the same, and now otherwise, as the kubelet's status
// manager keeps transition times. conds is modified in place.
func StampTransitions(conds, previous []v1.PodCondition, now time.Time) {
	for i := range conds {
		conds[i].LastTransitionTime = metav1.NewTime(now)
		for _, old := range previous {
			if old.Type == conds[i].Type && old.Status == conds[i].Status {
				conds[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
}
