package podworker

import v1 "k8s.io/api/core/v1"

// effectiveGrace computes the grace period, in seconds, that the next
// SyncTerminatingPod gets, from the current one (0 when none was set yet),
// the pod, and a kill's override.
//
// The pod's deletion grace period and the override are requests: the
// shortest request wins, a request of 0 (or less) counts as 1, and once a
// grace period is set it only ever shortens (decision D1: a larger request
// is ignored). When nothing was ever requested, the pod's
// spec.terminationGracePeriodSeconds applies, and 1 when the spec has none.
// A deletion grace period longer than the spec's is honoured, as the API
// server asked for it.
//
// shortened reports that a grace period was already set and the result is
// below it: a running SyncTerminatingPod must then be cancelled and rerun.
func effectiveGrace(current int64, pod *v1.Pod, override *int64) (grace int64, shortened bool) {
	grace = current
	request := func(v int64) {
		v = max(v, 1)
		if grace == 0 || v < grace {
			grace = v
		}
	}
	if pod != nil && pod.DeletionGracePeriodSeconds != nil {
		request(*pod.DeletionGracePeriodSeconds)
	}
	if override != nil {
		request(*override)
	}
	if grace == 0 {
		grace = 1
		if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = max(*pod.Spec.TerminationGracePeriodSeconds, 1)
		}
	}
	return grace, current != 0 && grace < current
}
