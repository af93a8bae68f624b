package lifecycle

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/mirror"
)

// admit runs admission for pod against the other active pods
// (SyncLoopOptions.AdmitHandlers, in order) and reports whether it may run.
// An admitted pod's earlier rejection, if any, is forgotten; a rejected one
// is remembered and reported (reject).
func (l *SyncLoop) admit(ctx context.Context, pod *v1.Pod) bool {
	active := l.GetActivePods()
	others := slices.DeleteFunc(active, func(p *v1.Pod) bool { return p.UID == pod.UID })
	r := l.admitters.Admit(ctx, &admission.Attributes{Pod: pod, OtherPods: others, Operation: admission.AddOperation})
	if !r.Admit {
		l.reject(ctx, pod, r)
		return false
	}
	l.rejected.forget(pod.UID)
	return true
}

// reject remembers that admission rejected pod, and tells the log, the
// Recorder and SyncLoopOptions.OnReject, in that order.
func (l *SyncLoop) reject(ctx context.Context, pod *v1.Pod, r admission.Result) {
	l.rejected.add(pod.UID)
	l.log.V(4).Info("Pod was rejected by admission", "pod", mirror.PodFullName(pod), "podUID", pod.UID, "reason", r.Reason, "message", r.Message)
	l.recorder.Eventf(pod, v1.EventTypeWarning, r.Reason, "%s", r.Message)
	if l.onReject != nil {
		l.onReject(ctx, pod, v1.PodStatus{
			Phase:    v1.PodFailed,
			Reason:   r.Reason,
			Message:  "Pod was rejected: " + r.Message,
			QOSClass: pod.Status.QOSClass,
		})
	}
}
