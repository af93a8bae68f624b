package virtualkubelet

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

// Reasons and messages the provider writes into pod statuses.
const (
	// ReasonContainerCreating is the waiting reason of a container the
	// backend has not started yet.
	ReasonContainerCreating = "ContainerCreating"
	// ReasonContainerStatusUnknown is the terminated reason of a container
	// whose end the backend could not report (the pod was never created,
	// or the backend lost it). The kubelet uses the same reason, with exit
	// code 137.
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
	// MessageContainerStatusUnknown goes with ReasonContainerStatusUnknown.
	MessageContainerStatusUnknown = "The container could not be located when the pod was terminated"
	// ExitCodeUnknown is the exit code reported for such a container.
	ExitCodeUnknown = 137
)

// podStatus computes the API status of pod from what the backend reports;
// rp nil means the backend has no such pod (yet). The result depends only
// on its arguments, so an unchanged backend gives an equal status and no
// notification.
func podStatus(pod *v1.Pod, rp *RemotePod) v1.PodStatus {
	st := v1.PodStatus{Phase: v1.PodPending}
	remote := map[string]RemoteContainer{}
	if rp != nil {
		for _, c := range rp.Containers {
			remote[c.Name] = c
		}
		t := metav1.NewTime(rp.CreatedAt)
		st.StartTime = &t
		st.PodIP = rp.IP
		if rp.IP != "" {
			st.PodIPs = []v1.PodIP{{IP: rp.IP}}
		}
	}
	running, exited := 0, 0
	var lastStart, lastFinish time.Time
	for _, spec := range pod.Spec.Containers {
		cs := v1.ContainerStatus{Name: spec.Name, Image: spec.Image}
		c, ok := remote[spec.Name]
		switch {
		case !ok || c.State == ContainerWaiting:
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: ReasonContainerCreating}
		case c.State == ContainerRunning:
			running++
			cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}
			cs.Ready = true
			cs.Started = new(true)
		default:
			exited++
			reason := "Completed"
			if c.ExitCode != 0 {
				reason = "Error"
			}
			cs.State.Terminated = &v1.ContainerStateTerminated{
				ExitCode:   c.ExitCode,
				Reason:     reason,
				StartedAt:  metav1.NewTime(c.StartedAt),
				FinishedAt: metav1.NewTime(c.FinishedAt),
			}
			cs.Started = new(false)
		}
		if ok {
			cs.Image = c.Image
			cs.RestartCount = c.RestartCount
			cs.ContainerID = fmt.Sprintf("simcloud://%s/%s", rp.UID, c.Name)
			lastStart = later(lastStart, c.StartedAt)
			lastFinish = later(lastFinish, c.FinishedAt)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	n := len(pod.Spec.Containers)
	st.Phase = phase(pod, st.ContainerStatuses, n > 0 && exited == n)
	setConditions(pod, &st, rp, lastStart, lastFinish)
	return st
}

// finalStatus is the status of a pod none of whose containers runs any
// more: what the backend reports after stopping it, or, when the backend
// has nothing (never created, or lost), the last status with every
// container not known to have exited marked ContainerStatusUnknown, as the
// kubelet does. The phase is Succeeded when every container exited 0, and
// Failed otherwise.
func finalStatus(pod *v1.Pod, rp *RemotePod, last *v1.PodStatus) v1.PodStatus {
	var st v1.PodStatus
	switch {
	case rp != nil:
		st = podStatus(pod, rp)
	case last != nil:
		st = *last.DeepCopy()
	default:
		st = podStatus(pod, nil)
	}
	var lastFinish time.Time
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		if cs.State.Terminated == nil {
			term := &v1.ContainerStateTerminated{
				ExitCode: ExitCodeUnknown,
				Reason:   ReasonContainerStatusUnknown,
				Message:  MessageContainerStatusUnknown,
			}
			if cs.State.Running != nil {
				term.StartedAt = cs.State.Running.StartedAt
			}
			cs.State = v1.ContainerState{Terminated: term}
		}
		cs.Ready = false
		cs.Started = new(false)
		lastFinish = later(lastFinish, cs.State.Terminated.FinishedAt.Time)
	}
	st.Phase = phase(pod, st.ContainerStatuses, true)
	setConditions(pod, &st, rp, time.Time{}, lastFinish)
	return st
}

// phase is the kubelet's phase (podstatus.Phase) of pod's containers with
// statuses; stopped says none will run again.
func phase(pod *v1.Pod, statuses []v1.ContainerStatus, stopped bool) v1.PodPhase {
	return podstatus.Phase(&backendView(pod).Spec, nil, statuses, stopped)
}

// backendView is pod as the backend runs it: its regular containers only
// (the backend runs no init container and applies the restart policy
// itself, so a container it reports exited is done), with pod's
// generation, readiness gates and status conditions (which the gates are
// read from).
func backendView(pod *v1.Pod) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Generation: pod.Generation},
		Spec: v1.PodSpec{
			Containers:     pod.Spec.Containers,
			RestartPolicy:  pod.Spec.RestartPolicy,
			ReadinessGates: pod.Spec.ReadinessGates,
		},
		Status: v1.PodStatus{Conditions: pod.Status.Conditions},
	}
}

// setConditions sets st's conditions, as every podkit runtime derives them
// (podstatus.Conditions, without a sandbox condition: the backend has no
// sandbox), over the containers the backend runs. Transition times come
// from the backend's own timestamps, so that an unchanged pod yields an
// equal status: PodScheduled and Initialized when the backend created the
// pod; ContainersReady and Ready when the last container started (while
// they are True), when the last one finished (once the pod is terminal),
// or at creation otherwise.
func setConditions(pod *v1.Pod, st *v1.PodStatus, rp *RemotePod, lastStart, lastFinish time.Time) {
	var created time.Time
	if rp != nil {
		created = rp.CreatedAt
	}
	st.Conditions = podstatus.Conditions(backendView(pod), st, podstatus.NoSandboxCondition)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		at := created
		if c.Type == v1.ContainersReady || c.Type == v1.PodReady {
			switch {
			case c.Status == v1.ConditionTrue:
				at = lastStart
			case podstatus.IsTerminal(st.Phase):
				at = later(created, lastFinish)
			}
		}
		c.LastTransitionTime = metav1.NewTime(at)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
