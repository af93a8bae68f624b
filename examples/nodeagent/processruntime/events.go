package processruntime

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/types"
)

// EventType is what happened in an Event.
type EventType int

const (
	// ContainerStarted: a container's process was started.
	ContainerStarted EventType = iota + 1
	// ContainerExited: a container's process ended (or failed to start:
	// the container's Exit then has ReasonStartError and the error as its
	// Message; see Event.Exit).
	ContainerExited
	// PodStopped: termination finished; no process of the pod runs. Its
	// Status is the pod's final status.
	PodStopped
	// ContainerKilling: termination is about to signal a running
	// container's process (SIGTERM, or SIGKILL at once when the hook's
	// context has ended). Sent by SyncTerminatingPod and
	// SyncTerminatingRuntimePod, once per running container and call; and
	// by SyncPod when it kills one container of a pod that goes on (its
	// liveness or startup probe failed, its postStart hook failed), with
	// the kubelet's Killing message as Message ("Container web failed
	// liveness probe, will be restarted", "FailedPostStartHook").
	ContainerKilling
	// ContainerBackOff: SyncPod did not restart an exited container
	// because it waits out its restart backoff; the container's
	// BackOffUntil in Status says until when. Sent once per SyncPod that
	// returns ErrBackOff.
	ContainerBackOff
	// ContainerFailed: a container could not be created and waits (the
	// kubelet's Failed event): Reason is the waiting reason
	// (ReasonCreateContainerConfigError) and Message why. Sent when the
	// reason or message changes, not at every retry.
	ContainerFailed
	// PodWarning: something about the pod the agent should record as a
	// warning event: Reason and Message say what (ReasonVolumeNotProvided,
	// ReasonFailedCreatePodSandBox, ...). Sent once per reason and
	// message in the pod's life.
	PodWarning
)

// String returns the type's name, "ContainerStarted" for instance.
func (t EventType) String() string {
	switch t {
	case ContainerStarted:
		return "ContainerStarted"
	case ContainerExited:
		return "ContainerExited"
	case PodStopped:
		return "PodStopped"
	case ContainerKilling:
		return "ContainerKilling"
	case ContainerBackOff:
		return "ContainerBackOff"
	case ContainerFailed:
		return "ContainerFailed"
	case PodWarning:
		return "PodWarning"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is a change the runtime observed in a pod, or an action it takes.
//
// ContainerStarted, ContainerExited and PodStopped report changes an agent
// acts on (an exit calls for a sync, as the kubelet's PLEG does). A
// container starts only within a SyncPod of its pod, whose result already
// reports it running: its ContainerStarted calls for no sync.
// ContainerKilling, ContainerBackOff, ContainerFailed and PodWarning are
// sent from inside the hooks (SyncTerminatingPod, SyncPod) to say what
// they do, for the record (the kubelet's Killing, BackOff and Failed
// events, and warnings): an agent must not sync a pod because of them, or
// a SyncPod in backoff would call itself again and again.
type Event struct {
	// Type is what happened.
	Type EventType
	// UID, Namespace and Name identify the pod.
	UID       types.UID
	Namespace string
	Name      string
	// Container is the container's name; empty for PodStopped.
	Container string
	// Init is true when Container is an init container.
	Init bool
	// Status is the pod's status just after the change (the caller's).
	Status PodStatus
	// Reason and Message, for ContainerFailed and PodWarning, say what
	// happened (Message never holds a secret: env values are not in it);
	// Message, for a ContainerKilling of SyncPod, why.
	Reason, Message string
}

// ContainerStatus returns the status of the event's container in Status.
func (ev Event) ContainerStatus() (ContainerStatus, bool) {
	if ev.Container == "" {
		return ContainerStatus{}, false
	}
	return ev.Status.Container(ev.Container)
}

// Exit returns how the event's container last ended (nil when it never
// did in this life of the pod): for ContainerExited, the exit it reports.
func (ev Event) Exit() *ExitStatus {
	c, ok := ev.ContainerStatus()
	if !ok {
		return nil
	}
	return c.Exit
}

// eventLocked builds an event with the pod's current status.
func (r *Runtime) eventLocked(t EventType, p *podState, containerName string) Event {
	ev := Event{Type: t, UID: p.uid, Namespace: p.namespace, Name: p.name, Container: containerName, Status: r.snapshotLocked(p)}
	if c := p.containers[containerName]; c != nil {
		ev.Init = c.rec.Init
	}
	return ev
}

// killingEventsLocked builds a ContainerKilling event for each container
// of p whose process runs, in name order.
func (r *Runtime) killingEventsLocked(p *podState) []Event {
	var names []string
	for name, c := range p.containers {
		if c.proc != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]Event, 0, len(names))
	for _, name := range names {
		out = append(out, r.eventLocked(ContainerKilling, p, name))
	}
	return out
}

// emitBackOff sends the ContainerBackOff event of p's container name.
func (r *Runtime) emitBackOff(p *podState, name string) {
	if r.onEvent == nil {
		return
	}
	r.mu.Lock()
	ev := r.eventLocked(ContainerBackOff, p, name)
	r.mu.Unlock()
	r.emit(ev)
}

func (r *Runtime) emit(evs ...Event) {
	if r.onEvent == nil {
		return
	}
	for _, ev := range evs {
		r.onEvent(ev)
	}
}

// emitWarning sends a PodWarning (container "" for the pod) once per
// reason and message in the pod's life.
func (r *Runtime) emitWarning(p *podState, container string, w reasonMessage) {
	r.mu.Lock()
	key := container + "\x00" + w.Reason + "\x00" + w.Message
	if p.warned[key] {
		r.mu.Unlock()
		return
	}
	if p.warned == nil {
		p.warned = map[string]bool{}
	}
	p.warned[key] = true
	ev := r.eventLocked(PodWarning, p, container)
	ev.Reason, ev.Message = w.Reason, w.Message
	r.mu.Unlock()
	r.log.Info("Pod warning", "pod", p.uid, "container", container, "reason", w.Reason, "message", w.Message)
	r.emit(ev)
}
