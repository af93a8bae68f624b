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

// APIStatus derives pod's API status from the runtime status, as the
// kubelet does: the pod IPs (the node's, Options.NodeIPs, for host-network
// pods), the state of each init and regular container in the spec
// (running, waiting, or terminated with its exit code and reason), the
// last termination of a restarted container, restart counts (the
// instance's CRI attempt), the Waiting state the syncer recorded for a
// container whose next instance could not be made (Waiting, with the last
// exit as the last state), readiness (a regular container or a sidecar
// while it runs, which the syncer's probe manager then overrides; a plain
// init container once it exited 0), the phase (podstatus.Phase), and the conditions of
// podstatus.Conditions (PodReadyToStartContainers from the sandboxes,
// Initialized, Ready, ContainersReady and PodScheduled, with the kubelet's
// reasons and messages, readiness gates honoured), as every podkit runtime
// reports them. The status and each condition observe pod.Generation
// (ObservedGeneration). A plain init container whose instance is gone
// once a regular container was created shows as completed, as the kubelet
// shows it.
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
// ran counts as failed), and no container but a completed init container
// is ready.
func (s *PodStatus) FinalAPIStatus(pod *v1.Pod) v1.PodStatus {
	return s.apiStatus(pod, true)
}

// MessageInitContainerGone is the message of the completed state given to
// an init container whose instance is gone after the pod was initialized.
const MessageInitContainerGone = "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally"

func (s *PodStatus) apiStatus(pod *v1.Pod, final bool) v1.PodStatus {
	out := v1.PodStatus{ObservedGeneration: pod.Generation}

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

	// A regular container created means the init containers are done,
	// even if their instances are gone.
	regularCreated := false
	for _, c := range pod.Spec.Containers {
		if s != nil && s.latest(c.Name, "") != nil {
			regularCreated = true
		}
	}
	initDone := true
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		sidecar := podstatus.IsSidecar(c)
		cs := s.containerAPIStatus(c, ReasonContainerCreating, final, !sidecar)
		if regularCreated && !sidecar && cs.ContainerID == "" {
			cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed", Message: MessageInitContainerGone}}
			cs.Ready = true
		}
		if t := cs.State.Terminated; !sidecar && (t == nil || t.ExitCode != 0) {
			initDone = false
		}
		out.InitContainerStatuses = append(out.InitContainerStatuses, cs)
	}
	waitReason := ReasonContainerCreating
	if !initDone {
		waitReason = ReasonPodInitializing
	}
	for i := range pod.Spec.Containers {
		out.ContainerStatuses = append(out.ContainerStatuses, s.containerAPIStatus(&pod.Spec.Containers[i], waitReason, final, false))
	}
	out.Phase = podstatus.Phase(&pod.Spec, out.InitContainerStatuses, out.ContainerStatuses, final)

	sandbox := podstatus.SandboxReady
	switch {
	case s == nil || len(s.Sandboxes) == 0:
		sandbox = podstatus.SandboxMissing
	case s.ReadySandbox() == nil || final:
		sandbox = podstatus.SandboxNotReady
	}
	out.Conditions = podstatus.Conditions(pod, &out, sandbox)
	return out
}

// containerAPIStatus is the API status of container c: its newest
// instance's state, and the one before's termination. A plain init
// container (plainInit) is ready once it exited 0; any other while it runs
// and the status is not final.
func (s *PodStatus) containerAPIStatus(c *v1.Container, waitReason string, final, plainInit bool) v1.ContainerStatus {
	out := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	var cur *ContainerStatus
	if s != nil {
		cur = s.latest(c.Name, "")
	}
	w, waiting := s.waitingOf(c.Name)
	if waiting && cur != nil && (w.Attempt <= cur.GetMetadata().GetAttempt() || mayRun(cur.GetState())) {
		waiting = false // an instance of that attempt exists, or one still runs
	}
	if cur == nil {
		out.State.Waiting = &v1.ContainerStateWaiting{Reason: waitReason}
		if waiting {
			out.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		}
		return out
	}
	if waiting {
		// The last instance exited and the next one could not be made:
		// the kubelet shows why, with the exit as the last state.
		out.RestartCount = int32(cur.GetMetadata().GetAttempt())
		out.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		out.LastTerminationState = s.stateOf(cur)
		started := false
		out.Started = &started
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
	if plainInit {
		out.Ready = out.State.Terminated != nil && out.State.Terminated.ExitCode == 0
	} else {
		out.Ready = isRunning && !final
	}
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

// waitingOf returns the Waiting state the syncer recorded for the
// container named name.
func (s *PodStatus) waitingOf(name string) (Waiting, bool) {
	if s == nil {
		return Waiting{}, false
	}
	w, ok := s.Waiting[name]
	return w, ok
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
