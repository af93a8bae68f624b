package processruntime

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/lifecycle/deadline"
	"github.com/podkit/podkit/mirror"
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
	// BackOff is, for an exited container whose restart waits out a
	// backoff, that backoff: it may start again BackOff after its exit.
	// Zero when the restart is immediate, as the first one is.
	BackOff time.Duration
	// WaitReason and WaitMessage, when set, say why the container cannot
	// be created and waits (ReasonCreateContainerConfigError).
	WaitReason, WaitMessage string
	// Started and Ready, when set, are what the per-pod features' probes
	// say of the running container (UsePodFeatures): started once its
	// startup probe passed, ready while its readiness probe passes (never
	// while the pod terminates). Nil: a running container is started and
	// ready.
	Started, Ready *bool
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
	// InitContainers, Containers and EphemeralContainers follow the pod
	// spec's order.
	InitContainers      []ContainerStatus
	Containers          []ContainerStatus
	EphemeralContainers []ContainerStatus
	// Time is when the snapshot was taken (the runtime's clock).
	Time time.Time
	// PodIPs are the pod's addresses on the pod network (Options.PodCIDR),
	// from its sandbox's start to its cleanup, or, for a pod in the host's
	// network (hostNetwork, or every pod without a sandbox), the node's
	// (HostIPs), as a kubelet reports them; none for a sandboxed pod
	// without a pod network.
	PodIPs []string
	// HostIPs are the node's addresses (Options.HostIPs), the primary
	// first: the API status's hostIP and hostIPs, as a kubelet reports
	// them for every pod bound to it.
	HostIPs []string
	// DeadlineExceeded: the pod was active longer than its
	// activeDeadlineSeconds (the per-pod features' deadline); APIStatus
	// reports it Failed with reason DeadlineExceeded.
	DeadlineExceeded bool

	// finalize is the PodStatusFunc of the kill that stopped the pod.
	finalize func(*v1.PodStatus)
}

// Running reports whether any container process of the pod runs,
// ephemeral containers' included.
func (s PodStatus) Running() bool {
	for _, list := range [][]ContainerStatus{s.InitContainers, s.Containers, s.EphemeralContainers} {
		for _, c := range list {
			if c.State == ContainerStateRunning {
				return true
			}
		}
	}
	return false
}

// Container returns the status of the container (init, regular or
// ephemeral) named name.
func (s PodStatus) Container(name string) (ContainerStatus, bool) {
	for _, list := range [][]ContainerStatus{s.InitContainers, s.Containers, s.EphemeralContainers} {
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
// counts and exit codes, the pod's IPs and the node's (hostIP, hostIPs),
// the phase (podstatus.Phase), and the
// PodReadyToStartContainers, Initialized, Ready, ContainersReady and
// PodScheduled conditions with the kubelet's reasons and messages. The
// status and each condition observe pod.Generation (ObservedGeneration),
// as the kubelet's do since PodObservedGenerationTracking. The previous
// pod.Status is read only to keep the transition times of conditions that
// did not change. The result is the caller's.
//
// A regular container or a sidecar is ready while it runs, unless its
// probes say otherwise (ContainerStatus.Ready, with the per-pod
// features); a regular init container is ready once it exited 0, as
// the kubelet reports it. An exited container that waits out its restart
// backoff is waiting, with reason CrashLoopBackOff, the kubelet's message
// naming the backoff, and the exit as its last termination; one that
// restarts at once (the first restart) shows its exit until it does, but
// one whose start failed waits in RunContainerError with the start's
// error. A stopped pod is always given a
// terminal phase; the kubelet leaves static pods out of that rule (a TODO
// upstream, kubernetes#116484), which podkit does not. A pod past its
// activeDeadlineSeconds is Failed, reason DeadlineExceeded. The kill's
// PodStatusFunc, if any, is applied last.
func APIStatus(pod *v1.Pod, s PodStatus) v1.PodStatus {
	hasInit := len(pod.Spec.InitContainers) > 0
	out := v1.PodStatus{
		ObservedGeneration:    pod.Generation,
		InitContainerStatuses: apiContainerStatuses(pod, pod.Spec.InitContainers, s.InitContainers, s.Stopped, hasInit, true),
		ContainerStatuses:     apiContainerStatuses(pod, pod.Spec.Containers, s.Containers, s.Stopped, hasInit, false),
		// Not in the phase or the conditions, as on a kubelet.
		EphemeralContainerStatuses: apiEphemeralStatuses(pod, s.EphemeralContainers, s.Stopped),
	}
	if !s.StartedAt.IsZero() {
		t := metav1.NewTime(s.StartedAt)
		out.StartTime = &t
	}
	for _, ip := range s.PodIPs {
		out.PodIPs = append(out.PodIPs, v1.PodIP{IP: ip})
	}
	if len(s.PodIPs) > 0 {
		out.PodIP = s.PodIPs[0]
	}
	for _, ip := range s.HostIPs {
		out.HostIPs = append(out.HostIPs, v1.HostIP{IP: ip})
	}
	if len(s.HostIPs) > 0 {
		out.HostIP = s.HostIPs[0]
	}
	if s.Stopped {
		markUnknownTerminated(out.InitContainerStatuses, out.ContainerStatuses)
	}
	out.Phase = podstatus.Phase(&pod.Spec, out.InitContainerStatuses, out.ContainerStatuses, s.Stopped)
	if s.DeadlineExceeded {
		deadline.MarkFailed(&out)
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

// apiContainerStatuses converts the statuses of one list of containers
// (init when init is true), in spec order; a spec container the runtime
// has not seen is waiting.
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
		st := v1.ContainerStatus{Name: spec.Name, Image: spec.Image, ImageID: "", ContainerID: c.ID, RestartCount: c.RestartCount, Started: new(false)}
		if c.LastExit != nil {
			st.LastTerminationState = v1.ContainerState{Terminated: terminated(c.LastExit)}
		}
		switch {
		case ok && c.WaitReason != "" && c.State != ContainerStateRunning && !stopped:
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: c.WaitReason, Message: c.WaitMessage}}
			if c.Exit != nil {
				st.LastTerminationState = v1.ContainerState{Terminated: terminated(c.Exit)}
			}
		case !ok || c.State == ContainerStateWaiting && c.Exit == nil:
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: waitReason}}
		case c.State == ContainerStateRunning:
			st.State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}}
			// A regular init container is ready once it completed; a
			// probed container when its probes say.
			st.Ready = (!init || podstatus.IsSidecar(&spec)) && (c.Ready == nil || *c.Ready)
			st.Started = new(c.Started == nil || *c.Started)
		case !stopped && c.BackOff > 0 && restartsAfter(pod, &spec, init, c.Exit.Code):
			// Exited, and its restart waits out a backoff: waiting, with
			// the exit as the last termination, as the kubelet shows a
			// crash loop.
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff, Message: crashLoopMessage(pod, spec.Name, c.BackOff)}}
			st.LastTerminationState = v1.ContainerState{Terminated: terminated(c.Exit)}
		case !stopped && c.Exit.Reason == ReasonStartError && restartsAfter(pod, &spec, init, c.Exit.Code):
			// Its start failed and it is started again at once: waiting,
			// with why, as the kubelet shows a failed start.
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonRunContainerError, Message: c.Exit.Message}}
			st.LastTerminationState = v1.ContainerState{Terminated: terminated(c.Exit)}
		default:
			st.State = v1.ContainerState{Terminated: terminated(c.Exit)}
			st.Ready = init && !podstatus.IsSidecar(&spec) && c.Exit.Code == 0
		}
		out = append(out, st)
	}
	return out
}

// crashLoopMessage is the kubelet's message of a container waiting out its
// restart backoff: "back-off 40s restarting failed container=web
// pod=web-0_default(<uid>)".
func crashLoopMessage(pod *v1.Pod, container string, backOff time.Duration) string {
	return fmt.Sprintf("back-off %s restarting failed container=%s pod=%s(%s)", backOff, container, mirror.PodFullName(pod), pod.UID)
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

func podName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
