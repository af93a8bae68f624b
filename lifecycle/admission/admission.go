package admission

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Operation is what an admission decision is about.
type Operation string

// AddOperation: the pod is being added to the node. It is the only
// operation lifecycle.SyncLoop asks about (it does not resize pods in
// place); the field exists so handlers written for the kubelet's API read
// the same.
const AddOperation Operation = "add"

// Attributes is what an admission decision is made from. Handlers must
// treat every field as read-only: the pods are shared with the rest of the
// agent.
type Attributes struct {
	// Pod is the pod to admit.
	Pod *v1.Pod
	// OtherPods are the node's active pods (see
	// lifecycle.SyncLoop.GetActivePods) other than Pod: the pods whose
	// resources are in use or about to be.
	OtherPods []*v1.Pod
	// Operation is AddOperation for pods added from config
	// (lifecycle.SyncLoop.HandlePodAdditions) and for those housekeeping
	// re-adds.
	Operation Operation
}

// Result is the outcome of one admission decision.
type Result struct {
	// Admit is true if the pod may run.
	Admit bool
	// Reason is a short CamelCase word saying why the pod was not admitted
	// (for example "OutOfcpu"). It becomes the event reason and the pod
	// status reason.
	Reason string
	// Message says, for a person, why the pod was not admitted.
	Message string
}

// Handler decides whether a pod may run on the node. lifecycle.SyncLoop
// asks its handlers in order for each pod added (as a Chain), and the first
// rejection wins: later handlers are not asked.
//
// Admit is called from the goroutine running the sync loop (or the one
// calling lifecycle.SyncLoop.HandlePodAdditions), one pod at a time, never
// concurrently with another Admit of the same lifecycle.SyncLoop. It must
// not block for long, must not modify attrs, and must not call the
// lifecycle.SyncLoop's Handle*, Dispatch or Housekeeping methods (they are
// serialized with the call and would deadlock); GetActivePods is fine. ctx
// is the sync loop's.
type Handler interface {
	Admit(ctx context.Context, attrs *Attributes) Result
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, attrs *Attributes) Result

// Admit calls f.
func (f HandlerFunc) Admit(ctx context.Context, attrs *Attributes) Result {
	return f(ctx, attrs)
}

var (
	_ Handler = HandlerFunc(nil)
	_ Handler = Chain(nil)
)

// ReasonUnexpectedAdmissionError: an admission handler gave an unusable
// answer (a rejection without a reason), or a Chain holds a nil handler.
const ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"

// Chain is a Handler that asks its handlers in order; the first rejection
// wins and later handlers are not asked. An empty Chain admits every pod.
//
// A rejection without a reason is given ReasonUnexpectedAdmissionError (and
// a message saying so when it has none), so the embedder always learns
// why; a nil handler in the chain rejects the pod the same way, naming its
// index. Admit has the threading rules of the handlers it asks.
type Chain []Handler

// Admit asks each handler of c in order.
func (c Chain) Admit(ctx context.Context, attrs *Attributes) Result {
	for i, h := range c {
		if h == nil {
			return Result{Reason: ReasonUnexpectedAdmissionError, Message: fmt.Sprintf("admission: handler %d of the chain is nil", i)}
		}
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
	return Result{Admit: true}
}
