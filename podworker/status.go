package podworker

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// StatusSource gives the hooks the pod's runtime status. It is optional:
// without one the hooks get the zero T.
type StatusSource[T any] interface {
	// PodStatus returns the runtime status of the pod with this UID, at least
	// as new as newerThan (the end of the previous hook of this UID; zero
	// for the first). It may block until such a status exists, but must
	// return when ctx ends. Called from worker goroutines, concurrently for
	// different UIDs. An error fails the sync (it is retried with backoff).
	PodStatus(ctx context.Context, uid types.UID, newerThan time.Time) (T, error)
}

// StoppedChecker is an optional interface of a StatusSource. When a pod is
// first seen already in a terminal phase (Succeeded or Failed) — as after an
// agent restart — the engine asks it whether the status positively shows
// that nothing of the pod runs. Only then does the pod skip
// SyncTerminatingPod and go straight to SyncTerminatedPod; otherwise it
// takes the safe path through SyncTerminatingPod.
type StoppedChecker[T any] interface {
	// NothingRunning reports whether status shows no running container and
	// no ready sandbox. It must not block.
	NothingRunning(status T) bool
}
