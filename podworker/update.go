package podworker

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// What an agent tells the engine about a pod: UpdatePodOptions, and why it
// tells it (UpdateType). What to stop and how is in kill.go.

// UpdateType says why UpdatePod was called. It is passed through to
// PodSyncer.SyncPod so a syncer can tell a first start from a later change.
type UpdateType int

const (
	// SyncPodSync is a periodic or replayed sync: nothing new was observed.
	// The engine's own resyncs and retries always use it.
	SyncPodSync UpdateType = iota
	// SyncPodUpdate is a change to the desired pod.
	SyncPodUpdate
	// SyncPodCreate is the first time the pod is seen. A Create for a UID
	// whose termination was already requested marks the worker
	// RestartRequested instead (see SyncKnownPods).
	SyncPodCreate
	// SyncPodKill asks for the pod's containers to be stopped. It always
	// starts termination.
	SyncPodKill
)

// String returns "sync", "update", "create" or "kill".
func (t UpdateType) String() string {
	switch t {
	case SyncPodSync:
		return "sync"
	case SyncPodUpdate:
		return "update"
	case SyncPodCreate:
		return "create"
	case SyncPodKill:
		return "kill"
	}
	return fmt.Sprintf("UpdateType(%d)", int(t))
}

func (t UpdateType) valid() bool { return t >= SyncPodSync && t <= SyncPodKill }

// UpdatePodOptions is one desired-state update for a pod worker.
type UpdatePodOptions struct {
	// UpdateType says why the update was made.
	UpdateType UpdateType
	// StartTime, when not zero, is when the change was observed; it feeds
	// the UpdatePod-to-hook latency metric. When updates coalesce the
	// oldest StartTime is kept.
	StartTime time.Time
	// Pod is the desired pod. It is required unless RunningPod is set. The
	// engine keeps the pointer and never mutates the pod: do not mutate it
	// after handing it over, send a new object instead.
	Pod *v1.Pod
	// MirrorPod is the mirror pod of a static Pod, if known. It must have
	// the same full name as Pod. Once given it is kept until another one is.
	MirrorPod *v1.Pod
	// RunningPod names a pod found only in the runtime. It is valid only with
	// SyncPodKill and no Pod; when Pod is set it is ignored.
	RunningPod *RuntimePod
	// KillPodOptions are the options of a kill (see KillPodOptions).
	KillPodOptions *KillPodOptions
}

// validate rejects an update the engine cannot act on (UpdatePod's
// ErrInvalidUpdate cases); nothing is recorded for it.
func validate(o *UpdatePodOptions) error {
	if !o.UpdateType.valid() {
		return invalid("unknown update type %d", int(o.UpdateType))
	}
	if o.Pod == nil {
		switch {
		case o.RunningPod == nil:
			return invalid("neither Pod nor RunningPod is set")
		case o.UpdateType != SyncPodKill:
			return invalid("runtime-only pod %s/%s can only be killed, got update type %s", o.RunningPod.Namespace, o.RunningPod.Name, o.UpdateType)
		case o.RunningPod.UID == "":
			return invalid("runtime-only pod %s/%s has no UID", o.RunningPod.Namespace, o.RunningPod.Name)
		case o.MirrorPod != nil:
			return invalid("runtime-only pod %s/%s was given a mirror pod", o.RunningPod.Namespace, o.RunningPod.Name)
		}
		return nil
	}
	if o.Pod.UID == "" {
		return invalid("pod %s/%s has no UID", o.Pod.Namespace, o.Pod.Name)
	}
	if mp := o.MirrorPod; mp != nil && (mp.Name != o.Pod.Name || mp.Namespace != o.Pod.Namespace) {
		return invalid("mirror pod %s/%s does not share the full name of pod %s/%s", mp.Namespace, mp.Name, o.Pod.Namespace, o.Pod.Name)
	}
	return nil
}
