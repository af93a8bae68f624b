package lifecycle

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// Operation is what an admission decision is about.
type Operation string

const (
	// AddOperation: the pod is being added to the node.
	AddOperation Operation = "add"
	// ResizeOperation: the pod's resources are being changed in place.
	// podkit's Handler never asks for it; it exists so handlers written
	// for both match the kubelet's API.
	ResizeOperation Operation = "resize"
)

// PodAdmitAttributes is what an admission decision is made from. Handlers
// must treat every field as read-only: the pods are shared with the rest of
// the agent.
type PodAdmitAttributes struct {
	// Pod is the pod to admit.
	Pod *v1.Pod
	// OtherPods are the node's active pods (see Handler.GetActivePods)
	// other than Pod: the pods whose resources are in use or about to be.
	OtherPods []*v1.Pod
	// Operation is AddOperation for pods handed to HandlePodAdditions.
	Operation Operation
}

// PodAdmitResult is the outcome of one admission decision.
type PodAdmitResult struct {
	// Admit is true if the pod may run.
	Admit bool
	// Reason is a short CamelCase word saying why the pod was not admitted
	// (for example "OutOfcpu"). It becomes the event reason and the pod
	// status reason.
	Reason string
	// Message says, for a person, why the pod was not admitted.
	Message string
}

// PodAdmitHandler decides whether a pod may run on the node. The Handler
// calls its handlers in order for each pod added, and the first rejection
// wins: later handlers are not asked.
//
// Admit is called from the goroutine running the Handler's sync loop (or
// the one calling HandlePodAdditions), one pod at a time, never
// concurrently with another Admit of the same Handler. It must not block for
// long, must not modify attrs, and must not call the Handler's Handle*,
// Dispatch or Housekeeping methods (they are serialized with the call and
// would deadlock); GetActivePods is fine. ctx is the sync loop's.
type PodAdmitHandler interface {
	Admit(ctx context.Context, attrs *PodAdmitAttributes) PodAdmitResult
}

// PodAdmitHandlerFunc adapts a function to a PodAdmitHandler.
type PodAdmitHandlerFunc func(ctx context.Context, attrs *PodAdmitAttributes) PodAdmitResult

// Admit calls f.
func (f PodAdmitHandlerFunc) Admit(ctx context.Context, attrs *PodAdmitAttributes) PodAdmitResult {
	return f(ctx, attrs)
}

var _ PodAdmitHandler = PodAdmitHandlerFunc(nil)

// Admission rejection reasons of podkit's own checks.
const (
	// ReasonNodeShutdown: the node is shutting down (ShutdownNode was
	// called); no pod is admitted any more.
	ReasonNodeShutdown = "NodeShutdown"
	// ReasonUnexpectedAdmissionError: an admission handler gave an
	// unusable answer (a rejection without a reason).
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
)

// admit runs handlers in order on attrs; the first rejection wins. A
// rejection without a reason is given ReasonUnexpectedAdmissionError, so
// the embedder always learns why.
func admit(ctx context.Context, handlers []PodAdmitHandler, attrs *PodAdmitAttributes) PodAdmitResult {
	for _, h := range handlers {
		r := h.Admit(ctx, attrs)
		if r.Admit {
			continue
		}
		if r.Reason == "" {
			r.Reason = ReasonUnexpectedAdmissionError
			if r.Message == "" {
				r.Message = "an admission handler rejected the pod without giving a reason"
			}
		}
		return r
	}
	return PodAdmitResult{Admit: true}
}
