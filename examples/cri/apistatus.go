package cri

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

// Waiting reasons of containers the runtime does not have (yet).
const (
	// ReasonContainerCreating: the container was not created yet.
	ReasonContainerCreating = "ContainerCreating"
	// ReasonPodInitializing: a regular container waits for the pod's init
	// containers.
	ReasonPodInitializing = "PodInitializing"
	// ReasonContainerStatusUnknown: the runtime cannot tell the
	// container's state.
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
)

// APIStatus derives pod's API status from the runtime status: the pod IPs
// (the node's, Options.NodeIPs, for host-network pods), the state of each
// init and regular container in the spec (running, waiting, or terminated
// with its exit code and reason), the last termination of a restarted
// container, restart counts (the instance's CRI attempt), readiness
// (running, as there are no probes), the Initialized, ContainersReady,
// Ready and PodReadyToStartContainers conditions, and the phase:
//   - Pending until the init containers succeeded and each regular
//     container was created;
//   - Running while a container runs, or while exited ones will be
//     restarted (restartPolicy Always, or OnFailure with a failure);
//   - Succeeded when every regular container exited with 0 and none will
//     restart; Failed when one exited otherwise under restartPolicy Never,
//     or an init container failed under it.
//
// A RestartPolicy Never pod whose sandbox is gone after its containers
// ran gets its final status (see FinalAPIStatus): it cannot run again.
// Condition transition times are left unset. pod is not modified.
func (s *PodStatus) APIStatus(pod *v1.Pod) v1.PodStatus {
	final := pod.Spec.RestartPolicy == v1.RestartPolicyNever && s.ReadySandbox() == nil && len(s.containers()) > 0
	return s.apiStatus(pod, final)
}

// FinalAPIStatus is APIStatus for a pod whose containers were stopped for
// good: nothing will restart, so the phase is Succeeded when every regular
// container exited with 0 and Failed otherwise (a container that never
// ran counts as failed), and nothing is ready.
func (s *PodStatus) FinalAPIStatus(pod *v1.Pod) v1.PodStatus {
	return s.apiStatus(pod, true)
}

func (s *PodStatus) apiStatus(pod *v1.Pod, final bool) v1.PodStatus {
	var out v1.PodStatus
	sandboxReady := s.ReadySandbox() != nil && !final

	ips := s.IPs()
	if pod.Spec.HostNetwork {
		ips = s.hostIPs()
	}
	for _, ip := range ips {
		out.PodIPs = append(out.PodIPs, v1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		out.PodIP = ips[0]
	}
	for _, ip := range s.hostIPs() {
		out.HostIPs = append(out.HostIPs, v1.HostIP{IP: ip})
	}
	if len(out.HostIPs) > 0 {
		out.HostIP = out.HostIPs[0].IP
	}
	if s != nil && len(s.Sandboxes) > 0 {
		t := metav1.NewTime(time.Unix(0, s.Sandboxes[len(s.Sandboxes)-1].GetCreatedAt()))
		out.StartTime = &t
	}

	initialized, initFailed, sidecarsReady := true, false, true
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := s.containerAPIStatus(c, ReasonContainerCreating, final)
		out.InitContainerStatuses = append(out.InitContainerStatuses, cs)
		if podstatus.IsSidecar(c) {
			sidecarsReady = sidecarsReady && cs.Ready
			continue
		}
		if t := cs.State.Terminated; t == nil || t.ExitCode != 0 {
			initialized = false
			initFailed = initFailed || t != nil
		}
	}
	waitReason := ReasonContainerCreating
	if !initialized {
		waitReason = ReasonPodInitializing
	}
	var running, waiting, stopped, succeeded int
	ready := sidecarsReady
	for i := range pod.Spec.Containers {
		cs := s.containerAPIStatus(&pod.Spec.Containers[i], waitReason, final)
		out.ContainerStatuses = append(out.ContainerStatuses, cs)
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.LastTerminationState.Terminated != nil:
			stopped++ // being restarted: it ran before
		default:
			waiting++
		}
		ready = ready && cs.Ready
	}
	// A regular container created in a ready sandbox means the init
	// containers are done, even if their instances are gone.
	if running+stopped > 0 {
		initialized = true
	}

	policy := pod.Spec.RestartPolicy
	switch {
	case final && (initFailed || !initialized):
		out.Phase = v1.PodFailed
	case final:
		if stopped == succeeded && running+waiting == 0 {
			out.Phase = v1.PodSucceeded
		} else {
			out.Phase = v1.PodFailed
		}
	case initFailed && policy == v1.RestartPolicyNever && running+stopped == 0:
		out.Phase = v1.PodFailed
	case !initialized:
		out.Phase = v1.PodPending
	case running > 0:
		out.Phase = v1.PodRunning
	case waiting > 0 || stopped == 0:
		out.Phase = v1.PodPending
	case policy == v1.RestartPolicyAlways || policy == "":
		out.Phase = v1.PodRunning
	case stopped == succeeded:
		out.Phase = v1.PodSucceeded
	case policy == v1.RestartPolicyNever:
		out.Phase = v1.PodFailed
	default:
		out.Phase = v1.PodRunning // OnFailure: the failed ones restart
	}

	out.Conditions = []v1.PodCondition{
		condition(v1.PodReadyToStartContainers, sandboxReady),
		condition(v1.PodInitialized, initialized),
		condition(v1.ContainersReady, ready && sandboxReady),
		condition(v1.PodReady, ready && sandboxReady),
	}
	return out
}

// containerAPIStatus is the API status of container c: its newest
// instance's state, and the one before's termination.
func (s *PodStatus) containerAPIStatus(c *v1.Container, waitReason string, final bool) v1.ContainerStatus {
	out := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	var cur *ContainerStatus
	if s != nil {
		cur = s.latest(c.Name, "")
	}
	if cur == nil {
		out.State.Waiting = &v1.ContainerStateWaiting{Reason: waitReason}
		return out
	}
	out.ContainerID = s.runtimeName() + "://" + cur.GetId()
	out.ImageID = cur.GetImageRef()
	if img := cur.GetImage().GetImage(); img != "" {
		out.Image = img
	}
	out.RestartCount = int32(cur.GetMetadata().GetAttempt())
	out.State = s.stateOf(cur)
	if prev := s.previous(cur); prev != nil && prev.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		out.LastTerminationState = s.stateOf(prev)
	}
	isRunning := out.State.Running != nil
	out.Started = &isRunning
	out.Ready = isRunning && !final
	return out
}

// stateOf is the API state of one container instance.
func (s *PodStatus) stateOf(c *ContainerStatus) v1.ContainerState {
	switch c.GetState() {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: unixNano(c.GetStartedAt())}}
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		reason := c.GetReason()
		if reason == "" {
			reason = "Completed"
			if c.GetExitCode() != 0 {
				reason = "Error"
			}
		}
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode:    c.GetExitCode(),
			Reason:      reason,
			Message:     c.GetMessage(),
			StartedAt:   unixNano(c.GetStartedAt()),
			FinishedAt:  unixNano(c.GetFinishedAt()),
			ContainerID: s.runtimeName() + "://" + c.GetId(),
		}}
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonContainerCreating}}
	}
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonContainerStatusUnknown, Message: c.GetMessage()}}
}

func (s *PodStatus) runtimeName() string {
	if s == nil || s.RuntimeName == "" {
		return defaultRuntimeName
	}
	return s.RuntimeName
}

func (s *PodStatus) hostIPs() []string {
	if s == nil {
		return nil
	}
	return s.HostIPs
}

func unixNano(ns int64) metav1.Time {
	if ns <= 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(0, ns))
}

func condition(t v1.PodConditionType, ok bool) v1.PodCondition {
	c := v1.PodCondition{Type: t, Status: v1.ConditionFalse}
	if ok {
		c.Status = v1.ConditionTrue
	}
	return c
}
