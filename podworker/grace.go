package podworker

import v1 "k8s.io/api/core/v1"

// MaxGracePeriodSeconds is the longest grace period, in seconds, the engine
// ever hands to SyncTerminatingPod: about 100 years. Every grace period the
// engine computes (from the pod's spec, its deletion grace period, or a
// kill's override) is clamped to it, so that a syncer's
// time.Duration(gracePeriod)*time.Second cannot overflow, and still has room
// to be doubled or added to a clock reading without overflowing either. A
// pod asking for more (math.MaxInt64 and the like are accepted by the API
// server) still gets a grace period of a century, not a negative one that
// would kill its containers at once.
const MaxGracePeriodSeconds int64 = 100 * 365 * 24 * 60 * 60

// The one rule for grace periods below 1 second: every request below 1 —
// 0 or negative, from the pod's spec, its deletion grace period or a kill's
// override — means 1, and is never an error. That is what the rest of a
// cluster does: the API server warns that a negative
// terminationGracePeriodSeconds "will be treated as 1" and turns a negative
// deletion grace period into 1, and the kubelet gives every pod at least 1
// second whatever was asked. An agent cannot fix a pod the API server
// accepted, so rejecting it would leave the pod impossible to stop.

// clampGrace brings a requested grace period into [1, MaxGracePeriodSeconds].
func clampGrace(v int64) int64 { return min(max(v, 1), MaxGracePeriodSeconds) }

// effectiveGrace computes the grace period, in seconds, that the next
// SyncTerminatingPod gets, from the current one (0 when none was set yet),
// the pod, and a kill's override.
//
// The pod's deletion grace period and the override are requests: the
// shortest request wins, and once a grace period is set it only ever
// shortens (decision D1: a larger request is ignored). When nothing was ever
// requested, the pod's spec.terminationGracePeriodSeconds applies, and 1
// when the spec has none. A deletion grace period longer than the spec's is
// honoured, as the API server asked for it. Every value is clamped to
// [1, MaxGracePeriodSeconds] first (see clampGrace).
//
// shortened reports that a grace period was already set and the result is
// below it: a running SyncTerminatingPod must then be cancelled and rerun.
func effectiveGrace(current int64, pod *v1.Pod, override *int64) (grace int64, shortened bool) {
	grace = current
	request := func(v int64) {
		v = clampGrace(v)
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
			grace = clampGrace(*pod.Spec.TerminationGracePeriodSeconds)
		}
	}
	return grace, current != 0 && grace < current
}
