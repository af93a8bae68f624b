package processruntime

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/internal/podstatus"
)

// ContainerState is where a container's process stands.
type ContainerState string

const (
	// ContainerStateWaiting: no process was started yet in this life of
	// the pod.
	ContainerStateWaiting ContainerState = "Waiting"
	// ContainerStateRunning: the container's process runs.
	ContainerStateRunning ContainerState = "Running"
	// ContainerStateExited: the process ended and has not been restarted
	// (yet: ContainerStatus.BackOffUntil says when it may be).
	ContainerStateExited ContainerState = "Exited"
)

// Reasons the runtime gives, as the kubelet names them.
const (
	// ReasonCompleted: the process exited with code 0.
	ReasonCompleted = "Completed"
	// ReasonError: the process exited with a non-zero code or a signal.
	ReasonError = "Error"
	// ReasonStartError: the process could not be started (no such command,
	// a missing working directory); the exit code is 128.
	ReasonStartError = "StartError"
	// ReasonStatusUnknown: the process ended while the runtime could not
	// wait for it (it was adopted after an agent restart), so its exit code
	// is unknown; 137 is reported, as the kubelet does.
	ReasonStatusUnknown = "ContainerStatusUnknown"
	// ReasonCrashLoopBackOff: an exited container waits out its restart
	// backoff.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonContainerCreating: the container has not started yet.
	ReasonContainerCreating = "ContainerCreating"
	// ReasonPodInitializing: the container waits for init containers.
	ReasonPodInitializing = "PodInitializing"
)

// ExitStatus is how one run of a container ended.
type ExitStatus struct {
	// Code is the exit code; 128+n when the process died of signal n.
	Code int32 `json:"code"`
	// Signal is the signal that ended the process, 0 if none.
	Signal int32 `json:"signal,omitempty"`
	// Reason is ReasonCompleted, ReasonError, ReasonStartError or
	// ReasonStatusUnknown; Message says more when there is more to say.
	Reason    string    `json:"reason"`
	Message   string    `json:"message,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	// FinishedAt is when the runtime saw the exit.
	FinishedAt time.Time `json:"finishedAt"`
	// ID is the ContainerID of the run that ended.
	ID string `json:"id,omitempty"`
}

// ContainerStatus is one container as the runtime sees it.
type ContainerStatus struct {
	// Name is the container's name in the pod spec.
	Name string
	// Image is the spec's image, recorded only.
	Image string
	// State is where the container's process stands.
	State ContainerState
	// ID names the current run ("process://<pid>.<start ticks>"): it
	// changes with every start. Empty before the first start.
	ID string
	// PID is the running process's ID, 0 when not running.
	PID int
	// StartedAt is when the running process started.
	StartedAt time.Time
	// Exit is how the latest run ended (nil when the container never
	// exited in this life of the pod). LastExit is the exit before it.
	Exit, LastExit *ExitStatus
	// RestartCount is how many times the container was started again after
	// an exit.
	RestartCount int32
	// BackOffUntil is, for an exited container that will be restarted, the
	// earliest time it may start again (zero: at the next SyncPod).
	BackOffUntil time.Time
}

// PodStatus is a snapshot of one pod as the runtime sees it: the T of the
// runtime's PodSyncer. The zero value is a pod the runtime knows nothing
// of, which has nothing running.
type PodStatus struct {
	// UID, Namespace and Name identify the pod.
	UID       types.UID
	Namespace string
	Name      string
	// StartedAt is when the runtime first synced the pod.
	StartedAt time.Time
	// Stopped is true once SyncTerminatingPod succeeded: no process of the
	// pod runs and none will start again.
	Stopped bool
	// InitContainers and Containers follow the pod spec's order.
	InitContainers []ContainerStatus
	Containers     []ContainerStatus
	// Time is when the snapshot was taken (the runtime's clock).
	Time time.Time

	// finalize is the PodStatusFunc of the kill that stopped the pod.
	finalize func(*v1.PodStatus)
}

// Running reports whether any container process of the pod runs.
func (s PodStatus) Running() bool {
	for _, list := range [][]ContainerStatus{s.InitContainers, s.Containers} {
		for _, c := range list {
			if c.State == ContainerStateRunning {
				return true
			}
		}
	}
	return false
}

// Container returns the status of the container (init or regular) named
// name.
func (s PodStatus) Container(name string) (ContainerStatus, bool) {
	for _, list := range [][]ContainerStatus{s.InitContainers, s.Containers} {
		for _, c := range list {
			if c.Name == name {
				return c, true
			}
		}
	}
	return ContainerStatus{}, false
}

// APIStatus turns the runtime's view of pod into a v1.PodStatus the way the
// kubelet derives one from its runtime: container statuses with restart
// counts and exit codes, the phase, and the PodReadyToStartContainers,
// Initialized, Ready, ContainersReady and PodScheduled conditions. The
// previous pod.Status is read only to keep the transition times of
// conditions that did not change. The result is the caller's.
//
// Containers are ready when running (the runtime has no probes). A stopped
// pod is always given a terminal phase; the kubelet leaves static pods out
// of that rule (a TODO upstream, kubernetes#116484), which podkit does not.
// The kill's PodStatusFunc, if any, is applied last.
func APIStatus(pod *v1.Pod, s PodStatus) v1.PodStatus {
	hasInit := len(pod.Spec.InitContainers) > 0
	out := v1.PodStatus{
		InitContainerStatuses: apiContainerStatuses(pod, pod.Spec.InitContainers, s.InitContainers, s.Stopped, hasInit, true),
		ContainerStatuses:     apiContainerStatuses(pod, pod.Spec.Containers, s.Containers, s.Stopped, hasInit, false),
	}
	if !s.StartedAt.IsZero() {
		t := metav1.NewTime(s.StartedAt)
		out.StartTime = &t
	}
	if s.Stopped {
		markUnknownTerminated(out.InitContainerStatuses, out.ContainerStatuses)
	}
	out.Phase = podPhase(pod, out.InitContainerStatuses, out.ContainerStatuses, s.Stopped)
	if s.Stopped && !podstatus.IsTerminal(out.Phase) {
		out.Phase = v1.PodFailed
	}
	now := s.Time
	if now.IsZero() {
		now = time.Now()
	}
	out.Conditions = conditions(pod, out, s, now)
	if s.finalize != nil {
		s.finalize(&out)
	}
	return out
}

// apiContainerStatuses converts the statuses of one list of containers, in
// spec order; a spec container the runtime has not seen is waiting.
func apiContainerStatuses(pod *v1.Pod, specs []v1.Container, have []ContainerStatus, stopped, hasInit, init bool) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	byName := make(map[string]ContainerStatus, len(have))
	for _, c := range have {
		byName[c.Name] = c
	}
	waitReason := ReasonContainerCreating
	if hasInit {
		waitReason = ReasonPodInitializing
	}
	out := make([]v1.ContainerStatus, 0, len(specs))
	for _, spec := range specs {
		c, ok := byName[spec.Name]
		st := v1.ContainerStatus{Name: spec.Name, Image: spec.Image, ImageID: "", ContainerID: c.ID, RestartCount: c.RestartCount}
		if c.LastExit != nil {
			st.LastTerminationState = v1.ContainerState{Terminated: terminated(c.LastExit)}
		}
		switch {
		case !ok || c.State == ContainerStateWaiting && c.Exit == nil:
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: waitReason}}
		case c.State == ContainerStateRunning:
			st.State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}}
			st.Ready = true
			started := true
			st.Started = &started
		case !stopped && shouldRestart(pod.Spec.RestartPolicy, c.Exit.Code, init):
			// Exited and due for a restart: waiting, with the exit as the
			// last termination, as the kubelet shows a crash loop.
			msg := fmt.Sprintf("back-off restarting failed container %s in pod %s", spec.Name, podName(pod))
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff, Message: msg}}
			st.LastTerminationState = v1.ContainerState{Terminated: terminated(c.Exit)}
		default:
			st.State = v1.ContainerState{Terminated: terminated(c.Exit)}
		}
		if st.Started == nil {
			f := false
			st.Started = &f
		}
		out = append(out, st)
	}
	return out
}

func terminated(e *ExitStatus) *v1.ContainerStateTerminated {
	return &v1.ContainerStateTerminated{
		ExitCode:    e.Code,
		Signal:      e.Signal,
		Reason:      e.Reason,
		Message:     e.Message,
		StartedAt:   metav1.NewTime(e.StartedAt),
		FinishedAt:  metav1.NewTime(e.FinishedAt),
		ContainerID: e.ID,
	}
}

// markUnknownTerminated gives a terminated state to the containers of a
// stopped pod that have none, as the kubelet does when it terminates a
// pod: once any regular container ran, every regular container; and every
// init container before the last one that left a trace.
func markUnknownTerminated(initStatuses, statuses []v1.ContainerStatus) {
	unknown := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		ExitCode: 137,
		Reason:   ReasonStatusUnknown,
		Message:  "The container could not be located when the pod was terminated",
	}}
	ran := func(c v1.ContainerStatus) bool {
		return c.State.Terminated != nil || c.State.Running != nil || c.LastTerminationState.Terminated != nil
	}
	initialized := len(initStatuses) == 0
	for _, c := range statuses {
		if ran(c) {
			initialized = true
		}
	}
	if initialized {
		for i := range statuses {
			if statuses[i].State.Terminated == nil {
				statuses[i].State = unknown
			}
		}
	}
	last := -1
	for i, c := range initStatuses {
		if ran(c) {
			last = i
		}
	}
	for i := 0; i < last; i++ {
		if initStatuses[i].State.Terminated == nil {
			initStatuses[i].State = unknown
		}
	}
}

// podPhase derives the phase from the container statuses the way the
// kubelet's getPhase does for pods without sidecars and without
// container-level restart rules.
func podPhase(pod *v1.Pod, initStatuses, statuses []v1.ContainerStatus, stopped bool) v1.PodPhase {
	policy := pod.Spec.RestartPolicy
	pendingInit, failedInit := 0, 0
	for _, c := range initStatuses {
		switch {
		case c.State.Terminated != nil:
			if c.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case c.State.Waiting != nil && c.LastTerminationState.Terminated != nil:
			if c.LastTerminationState.Terminated.ExitCode != 0 {
				failedInit++
			}
		default:
			pendingInit++
		}
	}
	var running, waiting, stoppedN, succeeded, unknown int
	for _, c := range statuses {
		switch {
		case c.State.Running != nil:
			running++
		case c.State.Terminated != nil:
			stoppedN++
			if c.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case c.State.Waiting != nil && c.LastTerminationState.Terminated != nil:
			stoppedN++
		case c.State.Waiting != nil:
			waiting++
		default:
			unknown++
		}
	}
	if failedInit > 0 && policy == v1.RestartPolicyNever {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0, waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stoppedN > 0 && unknown == 0:
		if stopped {
			if stoppedN == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		switch {
		case policy == v1.RestartPolicyAlways:
			return v1.PodRunning
		case stoppedN == succeeded:
			return v1.PodSucceeded
		case policy == v1.RestartPolicyNever:
			return v1.PodFailed
		}
		return v1.PodRunning
	}
	return v1.PodPending
}

// conditions builds the pod's conditions in the kubelet's order.
func conditions(pod *v1.Pod, st v1.PodStatus, s PodStatus, now time.Time) []v1.PodCondition {
	cond := func(t v1.PodConditionType, ok bool, reason, msg string) v1.PodCondition {
		c := v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now)}
		if ok {
			c.Status, c.Reason, c.Message = v1.ConditionTrue, "", ""
		}
		for _, old := range pod.Status.Conditions {
			if old.Type == t && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		return c
	}
	terminal := podstatus.IsTerminal(st.Phase)

	// The process runtime has no sandbox: the pod is ready to start
	// containers from its first sync until it stops.
	sandbox := cond(v1.PodReadyToStartContainers, !s.StartedAt.IsZero() && !s.Stopped, "", "")

	var incomplete []string
	for _, c := range st.InitContainerStatuses {
		if c.State.Terminated == nil || c.State.Terminated.ExitCode != 0 {
			incomplete = append(incomplete, c.Name)
		}
	}
	regularStarted := false
	for _, c := range st.ContainerStatuses {
		if c.State.Running != nil || c.State.Terminated != nil || c.LastTerminationState.Terminated != nil {
			regularStarted = true
		}
	}
	initDone := len(incomplete) == 0 || regularStarted || st.Phase == v1.PodSucceeded
	initialized := cond(v1.PodInitialized, initDone, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: %v", incomplete))
	if initDone && st.Phase == v1.PodSucceeded && len(incomplete) == 0 {
		initialized.Reason = "PodCompleted"
	}

	var unready []string
	for _, c := range st.ContainerStatuses {
		if !c.Ready {
			unready = append(unready, c.Name)
		}
	}
	var containersReady v1.PodCondition
	switch {
	case st.Phase == v1.PodSucceeded:
		containersReady = cond(v1.ContainersReady, false, "PodCompleted", "")
	case st.Phase == v1.PodFailed:
		containersReady = cond(v1.ContainersReady, false, "PodFailed", "")
	default:
		containersReady = cond(v1.ContainersReady, len(unready) == 0, "ContainersNotReady", fmt.Sprintf("containers with unready status: %v", unready))
	}

	ready := containersReady
	ready.Type = v1.PodReady
	ready.LastTransitionTime = cond(v1.PodReady, ready.Status == v1.ConditionTrue, "", "").LastTransitionTime
	if ready.Status == v1.ConditionTrue && !terminal {
		if msgs := podstatus.UnmetReadinessGateMessages(pod); len(msgs) > 0 {
			ready = cond(v1.PodReady, false, "ReadinessGatesNotReady", strings.Join(msgs, ", "))
		}
	}
	scheduled := cond(v1.PodScheduled, true, "", "")
	return []v1.PodCondition{sandbox, initialized, ready, containersReady, scheduled}
}

// shouldRestart applies the pod's restart policy to an exit. Init
// containers follow the same rule (a failed one is retried unless Never;
// a succeeded one is done).
func shouldRestart(policy v1.RestartPolicy, code int32, init bool) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return code != 0
	}
	// Always, or unset (the API server defaults it to Always).
	if init {
		return code != 0
	}
	return true
}

func podName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
