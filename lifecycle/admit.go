package lifecycle

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/mirror"
)

// admitPod runs admission for pod against the other active pods: no pod is
// admitted once ShutdownNode was called; otherwise Options.AdmitHandlers
// decide, in order.
func (h *Handler) admitPod(ctx context.Context, pod *v1.Pod) admission.Result {
	if h.shuttingDown.Load() {
		return admission.Result{Reason: ReasonNodeShutdown, Message: "Pod was rejected as the node is shutting down."}
	}
	active := h.GetActivePods()
	others := slices.DeleteFunc(active, func(p *v1.Pod) bool { return p.UID == pod.UID })
	return h.admitters.Admit(ctx, &admission.Attributes{Pod: pod, OtherPods: others, Operation: admission.AddOperation})
}

// reject remembers that admission rejected pod, and tells the log, the
// Recorder and Options.OnReject, in that order.
func (h *Handler) reject(ctx context.Context, pod *v1.Pod, r admission.Result) {
	h.rejected.add(pod.UID)
	h.log.V(4).Info("Pod was rejected by admission", "pod", mirror.PodFullName(pod), "podUID", pod.UID, "reason", r.Reason, "message", r.Message)
	h.recorder.Eventf(pod, v1.EventTypeWarning, r.Reason, "%s", r.Message)
	if h.onReject != nil {
		h.onReject(ctx, pod, v1.PodStatus{
			Phase:    v1.PodFailed,
			Reason:   r.Reason,
			Message:  "Pod was rejected: " + r.Message,
			QOSClass: pod.Status.QOSClass,
		})
	}
}
