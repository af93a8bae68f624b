package lifecycle

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// PodOperation says what a PodUpdate asks of the sync loop.
type PodOperation int

// The operations of a PodUpdate. Their values are the kubelet's, so logs and
// traces compare. Sources send full snapshots to a Config, which turns them
// into these operations; there is no SET operation.
const (
	// ADD: pods the source did not have before. Handled by
	// Handler.HandlePodAdditions (admission, then a SyncPodCreate).
	ADD PodOperation = iota
	// DELETE: pods the source now marks for graceful deletion (a deletion
	// timestamp appeared). Handled like UPDATE, so the pod workers see the
	// deletion grace period.
	DELETE
	// REMOVE: pods the source no longer has. Handled by
	// Handler.HandlePodRemoves (a SyncPodKill).
	REMOVE
	// UPDATE: pods whose spec, labels, non-local annotations or deletion
	// fields changed. Handled by Handler.HandlePodUpdates.
	UPDATE
	// RECONCILE: pods of which only the status changed. Handled by
	// Handler.HandlePodReconcile.
	RECONCILE
)

// String returns "ADD", "DELETE", "REMOVE", "UPDATE" or "RECONCILE".
func (op PodOperation) String() string {
	switch op {
	case ADD:
		return "ADD"
	case DELETE:
		return "DELETE"
	case REMOVE:
		return "REMOVE"
	case UPDATE:
		return "UPDATE"
	case RECONCILE:
		return "RECONCILE"
	}
	return fmt.Sprintf("PodOperation(%d)", int(op))
}

func (op PodOperation) valid() bool { return op >= ADD && op <= RECONCILE }

// PodUpdate is one change from one config source, as Config produces them
// and Handler.Run and Handler.Dispatch consume them.
//
// Ownership: whoever sends a PodUpdate hands its pods over. The Handler
// keeps the pointers (in the desired pod store and the pod workers) and
// never modifies them, and nobody else may modify them afterwards.
type PodUpdate struct {
	// Op says what happened to Pods.
	Op PodOperation
	// Pods are the pods concerned. Mirror pods may be among them (from the
	// API server source only).
	Pods []*v1.Pod
	// Source names the config source: mirror.ApiserverSource ("api") for
	// the API server, mirror.FileSource ("file") for manifests, or an
	// agent's own name. The dispatcher stamps it on every pod as the
	// kubernetes.io/config.source annotation, whatever the pod carried, so a
	// pod's origin is always the source it came from. It must not be empty.
	Source string
}
