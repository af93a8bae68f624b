package podworker

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What to stop, and how: the options of a kill (a SyncPodKill update or
// KillPod), and the pods known only from the runtime that a kill names
// instead of a Pod.

// KillPodOptions are the options of a kill, given with a SyncPodKill update
// or to KillPod.
type KillPodOptions struct {
	// CompletedCh, when not nil, is closed by the engine exactly once, when
	// the pod can no longer have running containers: after
	// SyncTerminatingPod succeeds, at once if that is already so (the pod is
	// terminated, finished, or was never started), or when its worker is
	// removed before it started.
	//
	// The contract: from the moment it is handed over, the engine owns
	// closing the channel. Make a new channel for every kill; do not close
	// it yourself, and do not hand the same channel to a second update (of
	// the same pod or another), even once it is closed. A violation cannot
	// crash the engine: the second close is skipped and logged at level 0,
	// as an error naming the pod's UID and full name.
	CompletedCh chan<- struct{}
	// Evict marks the termination as an eviction: the window then allows the
	// pod's content to be removed at once (ShouldPodContentBeRemoved). It
	// is sticky: once set for a UID it stays set.
	Evict bool
	// PodStatusFunc, when not nil, is handed to SyncTerminatingPod so the
	// syncer can adjust the pod's final status (a reason, a message). The
	// last one given wins.
	PodStatusFunc func(*v1.PodStatus)
	// PodTerminationGracePeriodSecondsOverride, when not nil, is a grace
	// period in seconds to use instead of the pod's. It can only shorten the
	// effective grace period. Like every grace period the engine reads, a
	// value below 1 (0 or negative) means 1 and one above
	// MaxGracePeriodSeconds means MaxGracePeriodSeconds. The engine never
	// writes to it (decision D14; read the effective value with Pod).
	PodTerminationGracePeriodSecondsOverride *int64
}

// RuntimePod identifies a pod that was found in the runtime but is no longer
// known to configuration (an orphan). It is only ever killed.
type RuntimePod struct {
	UID       types.UID
	Namespace string
	Name      string
}
