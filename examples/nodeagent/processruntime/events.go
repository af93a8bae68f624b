package processruntime

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// EventType is what happened in an Event.
type EventType int

const (
	// ContainerStarted: a container's process was started.
	ContainerStarted EventType = iota + 1
	// ContainerExited: a container's process ended (or failed to start).
	ContainerExited
	// PodStopped: termination finished; no process of the pod runs. Its
	// Status is the pod's final status.
	PodStopped
)

// String returns "ContainerStarted", "ContainerExited" or "PodStopped".
func (t EventType) String() string {
	switch t {
	case ContainerStarted:
		return "ContainerStarted"
	case ContainerExited:
		return "ContainerExited"
	case PodStopped:
		return "PodStopped"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is a change the runtime observed in a pod.
type Event struct {
	// Type is what happened.
	Type EventType
	// UID, Namespace and Name identify the pod.
	UID       types.UID
	Namespace string
	Name      string
	// Container is the container's name; empty for PodStopped.
	Container string
	// Status is the pod's status just after the change (the caller's).
	Status PodStatus
}

// eventLocked builds an event with the pod's current status.
func (r *Runtime) eventLocked(t EventType, p *podState, containerName string) Event {
	return Event{Type: t, UID: p.uid, Namespace: p.namespace, Name: p.name, Container: containerName, Status: r.snapshotLocked(p)}
}

func (r *Runtime) emit(ev Event) {
	if r.onEvent != nil {
		r.onEvent(ev)
	}
}
