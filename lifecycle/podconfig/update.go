package podconfig

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// PodOperation says what a PodUpdate asks of the sync loop.
type PodOperation int

// The operations of a PodUpdate. Their values, and the words String gives
// them ("ADD", "UPDATE", ...), are the kubelet's, so logs and traces
// compare with a kubelet's "SyncLoop ADD" lines. Sources send full
// snapshots to a Config, which turns them into these operations; there is
// no SET operation.
const (
	// OpAdd: pods the source did not have before. Handled by
	// lifecycle.SyncLoop.HandlePodAdditions (admission, then a
	// SyncPodCreate).
	OpAdd PodOperation = iota
	// OpDelete: pods the source now marks for graceful deletion (a deletion
	// timestamp appeared). Handled like OpUpdate, so the pod workers see
	// the deletion grace period.
	OpDelete
	// OpRemove: pods the source no longer has. Handled by
	// lifecycle.SyncLoop.HandlePodRemoves (a SyncPodKill).
	OpRemove
	// OpUpdate: pods whose spec, labels, non-local annotations or deletion
	// fields changed. Handled by lifecycle.SyncLoop.HandlePodUpdates.
	OpUpdate
	// OpReconcile: pods of which only the status changed. Handled by
	// lifecycle.SyncLoop.HandlePodReconcile.
	OpReconcile
)

// String returns the kubelet's word for op: "ADD", "DELETE", "REMOVE",
// "UPDATE" or "RECONCILE".
func (op PodOperation) String() string {
	switch op {
	case OpAdd:
		return "ADD"
	case OpDelete:
		return "DELETE"
	case OpRemove:
		return "REMOVE"
	case OpUpdate:
		return "UPDATE"
	case OpReconcile:
		return "RECONCILE"
	}
	return fmt.Sprintf("PodOperation(%d)", int(op))
}

// Valid reports whether op is one of the operations above.
func (op PodOperation) Valid() bool { return op >= OpAdd && op <= OpReconcile }

// PodUpdate is one change from one config source, as Config produces them
// and lifecycle.SyncLoop.Run and lifecycle.SyncLoop.Dispatch consume
// them.
//
// Ownership: whoever sends a PodUpdate hands its pods over. The SyncLoop
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

	// fromConfig is set by Config: see FromConfig.
	fromConfig bool
}

// FromConfig reports whether a Config made u (SetPods or Merge). Such an
// update's pods are already what the sync loop needs: deep copies the
// receiver owns, stamped with u.Source, without nil pods, pods without a
// UID, mirror pods from a source other than the API server, or repeated
// full names or UIDs. lifecycle.SyncLoop.Dispatch therefore checks and
// stamps only the pods of an update no Config made (a literal PodUpdate),
// so each pod goes through the rules once. An update a Config made must be
// handed on as it is: adding pods to it makes them skip the rules.
func (u PodUpdate) FromConfig() bool { return u.fromConfig }
