package statuswriter

import (
	"encoding/json"

	"github.com/podkit/podkit/internal/podstatus"
	v1 "k8s.io/api/core/v1"
)

// statusToWrite is the status the API server should hold, given the stored
// one and the one the agent derived: the derived status, with these rules
// applied:
//   - a terminal stored phase is kept (the API server refuses to leave it);
//   - a terminal derived phase is replaced by the stored phase while
//     containers may run;
//   - conditions of types the agent did not derive are kept, and a
//     condition whose status did not change keeps its transition time;
//   - the start time, once stored, is kept, and so are the fields the agent
//     does not own (nominated node, resource claim statuses).
//
// The result is normalized as the API server stores it (times to the
// second), so an unchanged status compares equal to the stored one.
func statusToWrite(stored, derived v1.PodStatus, mayRun bool) v1.PodStatus {
	next := *derived.DeepCopy()
	switch {
	case podstatus.IsTerminal(stored.Phase):
		next.Phase = stored.Phase
	case podstatus.IsTerminal(next.Phase) && mayRun:
		next.Phase = stored.Phase
		if next.Phase == "" {
			next.Phase = v1.PodPending
		}
	}

	derivedTypes := make(map[v1.PodConditionType]bool, len(next.Conditions))
	for i := range next.Conditions {
		c := &next.Conditions[i]
		derivedTypes[c.Type] = true
		for _, old := range stored.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	for _, old := range stored.Conditions {
		if !derivedTypes[old.Type] {
			next.Conditions = append(next.Conditions, old)
		}
	}
	if stored.StartTime != nil {
		next.StartTime = stored.StartTime.DeepCopy()
	}
	next.NominatedNodeName = stored.NominatedNodeName
	next.ResourceClaimStatuses = stored.ResourceClaimStatuses
	next.ExtendedResourceClaimStatus = stored.ExtendedResourceClaimStatus
	return normalize(next)
}

// normalize round-trips s through JSON, as storing it in the API server
// does (metav1.Time keeps whole seconds).
func normalize(s v1.PodStatus) v1.PodStatus {
	b, err := json.Marshal(s)
	if err != nil {
		return s
	}
	var out v1.PodStatus
	if err := json.Unmarshal(b, &out); err != nil {
		return s
	}
	return out
}

// terminalStatus returns s with a terminal phase: a status whose phase is
// not terminal becomes Failed, as the kubelet's status manager does when a
// pod's containers have stopped (nothing will run again, and nothing said
// the pod succeeded). s is not modified.
func terminalStatus(s v1.PodStatus) v1.PodStatus {
	if podstatus.IsTerminal(s.Phase) {
		return s
	}
	out := *s.DeepCopy()
	out.Phase = v1.PodFailed
	return out
}
