package events

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/mirror"
)

// Event reasons a podkit agent records, named as the kubelet names them
// (k8s.io/kubernetes/pkg/kubelet/events), with the same meaning, so that
// dashboards and alerts built for kubelet nodes work on podkit nodes.
const (
	// ReasonCreated (Normal, on a container): its container was created.
	ReasonCreated = "Created"
	// ReasonStarted (Normal, on a container): its process was started.
	ReasonStarted = "Started"
	// ReasonFailed (Warning, on a container): it could not be started;
	// the message is "Error: " and the runtime's error.
	ReasonFailed = "Failed"
	// ReasonKilling (Normal, on a container): it is being stopped.
	ReasonKilling = "Killing"
	// ReasonBackOff (Warning, on a container): an exited container waits
	// out its restart backoff (a crash loop).
	ReasonBackOff = "BackOff"
	// ReasonEvicted (Warning, on a pod): the node evicted the pod.
	ReasonEvicted = "Evicted"
	// ReasonStarting (Normal, on the Node): the node agent started.
	ReasonStarting = "Starting"
	// ReasonNodeReady and ReasonNodeNotReady (Normal, on the Node): the
	// Node's Ready condition the agent posts changed.
	ReasonNodeReady    = "NodeReady"
	ReasonNodeNotReady = "NodeNotReady"
	// ReasonNodeShutdown (Normal, on the Node): the node is shutting down
	// and stops its pods.
	ReasonNodeShutdown = "Shutdown"
)

// Messages of the events above, in the kubelet's words where the meaning is
// the same.
const (
	MessageCreated  = "Container created"
	MessageStarted  = "Container started"
	MessageStarting = "Starting podkit agent."
	// MessageNodeShutdown is the kubelet's when its shutdown manager sees
	// the node shutting down.
	MessageNodeShutdown = "Shutdown manager detected shutdown event"
)

// KillingMessage is the message of a Killing event for container.
func KillingMessage(container string) string {
	return fmt.Sprintf("Stopping container %s", container)
}

// BackOffMessage is the message of a BackOff event for container of pod.
func BackOffMessage(pod *v1.Pod, container string) string {
	return fmt.Sprintf("Back-off restarting failed container %s in pod %s", container, podDescription(pod))
}

// FailedMessage is the message of a Failed event: the runtime's error.
func FailedMessage(runtimeMessage string) string {
	return "Error: " + runtimeMessage
}

// NodeStatusMessage is the message of a NodeReady or NodeNotReady event.
func NodeStatusMessage(nodeName, reason string) string {
	return fmt.Sprintf("Node %s status is now: %s", nodeName, reason)
}

// podDescription names a pod as the kubelet's messages do: its full name
// and UID, name_namespace(uid).
func podDescription(pod *v1.Pod) string {
	return fmt.Sprintf("%s(%s)", mirror.PodFullName(pod), pod.UID)
}

// ContainerRef returns the reference an event about container of pod is
// recorded on: the pod, with the container's field path
// (spec.containers{name} or spec.initContainers{name}), as the kubelet
// refers to containers. A name the spec does not hold gets the kubelet's
// "implicitly required container" path.
func ContainerRef(pod *v1.Pod, container string) *v1.ObjectReference {
	path := "implicitly required container " + container
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == container {
			path = fmt.Sprintf("spec.initContainers{%s}", container)
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			path = fmt.Sprintf("spec.containers{%s}", container)
		}
	}
	return &v1.ObjectReference{
		Kind:            "Pod",
		APIVersion:      "v1",
		Namespace:       pod.Namespace,
		Name:            pod.Name,
		UID:             pod.UID,
		ResourceVersion: pod.ResourceVersion,
		FieldPath:       path,
	}
}

// NodeRef returns the reference events about node are recorded on, with
// its UID, as the kubelet's.
func NodeRef(node *v1.Node) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
}
