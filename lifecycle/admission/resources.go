package admission

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Admission rejection reasons of the handlers in this file. They are the
// kubelet's, so alerts written for it keep working.
const (
	// ReasonOutOfCPU: the pod's CPU request does not fit.
	ReasonOutOfCPU = "OutOfcpu"
	// ReasonOutOfMemory: the pod's memory request does not fit.
	ReasonOutOfMemory = "OutOfmemory"
	// ReasonOutOfPods: the node already runs as many pods as it may.
	ReasonOutOfPods = "OutOfpods"
)

// PodRequests returns the pod's effective resource requests: what the node
// must set aside for it, computed the way the kubelet and the scheduler do.
//
//   - The regular containers run together: their requests add up.
//   - Init containers run one at a time before them, each next to the
//     restartable ("sidecar", restartPolicy Always) init containers that
//     started before it; a sidecar keeps running with the regular
//     containers, so its request also adds to theirs.
//   - Per resource, the pod needs the larger of the two phases.
//   - A pod-level request (spec.resources.requests) for CPU or memory
//     replaces the value computed from the containers.
//   - spec.overhead is added last.
//
// A nil pod has no requests. The list is new and the caller's.
func PodRequests(pod *v1.Pod) v1.ResourceList {
	reqs := v1.ResourceList{}
	if pod == nil {
		return reqs
	}
	for i := range pod.Spec.Containers {
		addResources(reqs, pod.Spec.Containers[i].Resources.Requests)
	}
	sidecars := v1.ResourceList{}
	initPeak := v1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		step := v1.ResourceList{}
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			addResources(reqs, c.Resources.Requests)
			addResources(sidecars, c.Resources.Requests)
			addResources(step, sidecars)
		} else {
			addResources(step, c.Resources.Requests)
			addResources(step, sidecars)
		}
		maxResources(initPeak, step)
	}
	maxResources(reqs, initPeak)
	if pod.Spec.Resources != nil {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if q, ok := pod.Spec.Resources.Requests[name]; ok {
				reqs[name] = q.DeepCopy()
			}
		}
	}
	addResources(reqs, pod.Spec.Overhead)
	return reqs
}

func addResources(into, add v1.ResourceList) {
	for name, q := range add {
		if cur, ok := into[name]; ok {
			cur.Add(q)
			into[name] = cur
		} else {
			into[name] = q.DeepCopy()
		}
	}
}

func maxResources(into, other v1.ResourceList) {
	for name, q := range other {
		if cur, ok := into[name]; !ok || q.Cmp(cur) > 0 {
			into[name] = q.DeepCopy()
		}
	}
}

// ResourceFitHandler is a Handler that admits a pod only if its
// effective CPU and memory requests (PodRequests) fit in what the node's
// allocatable leaves after the requests of the other active pods. A resource
// the allocatable does not list is not checked, and a pod that requests none
// of a resource always fits it. Other resources (ephemeral storage,
// extended resources) are not checked. Rejections carry ReasonOutOfCPU or
// ReasonOutOfMemory (CPU is checked first) and a message with the numbers,
// CPU in millicores and memory in bytes.
//
// Create it with NewResourceFitHandler. It is safe for concurrent use.
type ResourceFitHandler struct {
	allocatable func() v1.ResourceList
}

var _ Handler = (*ResourceFitHandler)(nil)

// NewResourceFitHandler returns a ResourceFitHandler that reads the node's
// allocatable resources from allocatable on every decision, so the embedder
// can change them (after a node status update, say). allocatable is called
// from the sync loop's goroutine, must not block, and must return a list the
// handler may read but that nobody modifies afterwards. It returns an error
// if allocatable is nil.
func NewResourceFitHandler(allocatable func() v1.ResourceList) (*ResourceFitHandler, error) {
	if allocatable == nil {
		return nil, errors.New("admission: NewResourceFitHandler needs an allocatable function, got nil")
	}
	return &ResourceFitHandler{allocatable: allocatable}, nil
}

// Admit checks attrs.Pod against the allocatable resources minus the
// requests of attrs.OtherPods.
func (h *ResourceFitHandler) Admit(_ context.Context, attrs *Attributes) Result {
	if attrs == nil || attrs.Pod == nil {
		return Result{Reason: ReasonUnexpectedAdmissionError, Message: "admission: resource fit check was given no pod"}
	}
	allocatable := h.allocatable()
	want := PodRequests(attrs.Pod)
	used := v1.ResourceList{}
	for _, p := range attrs.OtherPods {
		addResources(used, PodRequests(p))
	}
	for _, check := range []struct {
		name   v1.ResourceName
		reason string
		value  func(resource.Quantity) int64
	}{
		{v1.ResourceCPU, ReasonOutOfCPU, func(q resource.Quantity) int64 { return q.MilliValue() }},
		{v1.ResourceMemory, ReasonOutOfMemory, func(q resource.Quantity) int64 { return q.Value() }},
	} {
		capacity, ok := allocatable[check.name]
		if !ok {
			continue
		}
		requested := check.value(want[check.name])
		if requested <= 0 {
			continue
		}
		inUse := check.value(used[check.name])
		total := check.value(capacity)
		if requested > total-inUse {
			return Result{
				Reason: check.reason,
				Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
					check.name, requested, inUse, total),
			}
		}
	}
	return Result{Admit: true}
}

// MaxPodsHandler is a Handler that admits a pod only while fewer
// than a fixed number of other pods are active on the node, as the kubelet's
// max-pods setting does. Rejections carry ReasonOutOfPods.
//
// Create it with NewMaxPodsHandler. It is safe for concurrent use.
type MaxPodsHandler struct {
	max int
}

var _ Handler = (*MaxPodsHandler)(nil)

// NewMaxPodsHandler returns a MaxPodsHandler admitting at most maxPods
// active pods. It returns an error if maxPods is not positive.
func NewMaxPodsHandler(maxPods int) (*MaxPodsHandler, error) {
	if maxPods <= 0 {
		return nil, fmt.Errorf("admission: NewMaxPodsHandler: max pods is %d; want 1 or more", maxPods)
	}
	return &MaxPodsHandler{max: maxPods}, nil
}

// Admit rejects attrs.Pod if len(attrs.OtherPods) is already the maximum.
func (h *MaxPodsHandler) Admit(_ context.Context, attrs *Attributes) Result {
	if attrs == nil || attrs.Pod == nil {
		return Result{Reason: ReasonUnexpectedAdmissionError, Message: "admission: max pods check was given no pod"}
	}
	if used := len(attrs.OtherPods); used+1 > h.max {
		return Result{
			Reason:  ReasonOutOfPods,
			Message: fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", used, h.max),
		}
	}
	return Result{Admit: true}
}
