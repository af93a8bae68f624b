package downwardapi

import (
	"fmt"
	"math/big"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultedLimits are the resources whose unset (or zero) limit a
// resourceFieldRef reads as the pod's limit, else the node's allocatable:
// hugepages are never overcommitted, so their limit is always set.
var defaultedLimits = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}

// ResourceValue returns the value of a resourceFieldRef: the named
// container's request or limit of cpu, memory, ephemeral-storage or
// hugepages-<size>, divided by the selector's divisor (1 when unset) and
// rounded up, as a decimal integer.
//
// The container is fs.ContainerName's (a container or init container of
// pod) when set, else container (the one whose environment is built; nil
// is an error then). An unset or zero limit of cpu, memory or
// ephemeral-storage reads as the pod-level limit (spec.resources), else
// as the node's allocatable, else 0; an unset request reads as 0.
func ResourceValue(fs *v1.ResourceFieldSelector, pod *v1.Pod, container *v1.Container, allocatable v1.ResourceList) (string, error) {
	if fs.ContainerName != "" {
		c, err := findContainer(pod, fs.ContainerName)
		if err != nil {
			return "", err
		}
		container = c
	}
	if container == nil {
		return "", fmt.Errorf("resourceFieldRef %q names no container", fs.Resource)
	}
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if divisor.Sign() < 0 {
		return "", fmt.Errorf("resourceFieldRef %q: negative divisor %s", fs.Resource, divisor.String())
	}
	kind, name, ok := strings.Cut(fs.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
	}
	res := v1.ResourceName(name)
	switch {
	case res == v1.ResourceCPU || res == v1.ResourceMemory || res == v1.ResourceEphemeralStorage:
	case strings.HasPrefix(name, v1.ResourceHugePagesPrefix):
	default:
		return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
	}
	var q resource.Quantity
	if kind == "requests" {
		q = container.Resources.Requests[res]
	} else {
		q = limit(pod, container, res, allocatable)
	}
	if res == v1.ResourceCPU {
		return ceilDiv(q.MilliValue(), divisor.MilliValue()), nil
	}
	return ceilDiv(q.Value(), divisor.Value()), nil
}

// limit returns container's limit of res, defaulted for the resources of
// defaultedLimits.
func limit(pod *v1.Pod, container *v1.Container, res v1.ResourceName, allocatable v1.ResourceList) resource.Quantity {
	if q, ok := container.Resources.Limits[res]; ok && !q.IsZero() {
		return q
	}
	defaulted := false
	for _, r := range defaultedLimits {
		defaulted = defaulted || r == res
	}
	if !defaulted {
		return resource.Quantity{}
	}
	if pod != nil && pod.Spec.Resources != nil {
		if q, ok := pod.Spec.Resources.Limits[res]; ok && !q.IsZero() {
			return q
		}
	}
	return allocatable[res]
}

// ceilDiv returns ceil(n/d) in decimal, for d > 0 (a divisor of zero, which
// no non-zero quantity gives, reads as 1). It computes in big integers so
// that no value overflows or loses precision.
func ceilDiv(n, d int64) string {
	if d <= 0 {
		d = 1
	}
	q, m := new(big.Int).DivMod(big.NewInt(n), big.NewInt(d), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.String()
}

// findContainer returns the container or init container of pod named name.
func findContainer(pod *v1.Pod, name string) (*v1.Container, error) {
	if pod != nil {
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == name {
				return &pod.Spec.Containers[i], nil
			}
		}
		for i := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[i].Name == name {
				return &pod.Spec.InitContainers[i], nil
			}
		}
	}
	return nil, fmt.Errorf("container %s not found", name)
}
