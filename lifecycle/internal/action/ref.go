package action

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// FindContainer returns the container of pod named name, among its
// regular, init and ephemeral containers (an ephemeral container's common
// fields), and the field path of the kubelet's container references
// ("spec.containers{name}"); ok is false when pod has no such container.
func FindContainer(pod *v1.Pod, name string) (c *v1.Container, fieldPath string, ok bool) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], fmt.Sprintf("spec.containers{%s}", name), true
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], fmt.Sprintf("spec.initContainers{%s}", name), true
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
			return &c, fmt.Sprintf("spec.ephemeralContainers{%s}", name), true
		}
	}
	return nil, "", false
}

// ContainerRef returns the object an event about pod's container named
// name is recorded on, as the kubelet's: a reference to the pod with the
// container's field path ("implicitly required container NAME" for a name
// the spec does not hold).
func ContainerRef(pod *v1.Pod, name string) *v1.ObjectReference {
	_, path, ok := FindContainer(pod, name)
	if !ok {
		path = "implicitly required container " + name
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
