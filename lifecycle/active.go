package lifecycle

import (
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

// GetActivePods returns the desired pods whose resources are in use or
// about to be: the pods in the store, minus those admission rejected, minus
// those the workers know are terminated, minus those in a terminal phase
// whose termination was never requested (finished before this agent saw
// them). Mirror pods are never among them. Admission compares a new pod
// against them. Safe to call from any goroutine; the slice is the caller's
// and the pods are shared (do not modify them).
func (l *SyncLoop) GetActivePods() []*v1.Pod {
	pods := l.store.GetPods()
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		if !l.isInactive(p) {
			out = append(out, p)
		}
	}
	return out
}

// isInactive is the opposite of GetActivePods' rule for one desired pod.
func (l *SyncLoop) isInactive(p *v1.Pod) bool {
	if l.rejected.has(p.UID) || l.workers.IsPodKnownTerminated(p.UID) {
		return true
	}
	return podstatus.IsTerminal(p.Status.Phase) && !l.workers.IsPodTerminationRequested(p.UID)
}
