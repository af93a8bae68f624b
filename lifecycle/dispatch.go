package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/lifecycle/internal/sourcepods"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// Dispatch hands one config update to the matching Handle* method: OpAdd
// to HandlePodAdditions, OpUpdate and OpDelete to HandlePodUpdates (a
// graceful deletion is an update carrying the deletion grace period),
// OpRemove to HandlePodRemoves, OpReconcile to HandlePodReconcile. Before
// that it stamps every pod with the kubernetes.io/config.source annotation
// naming u.Source (copying the pod when it said otherwise: a pod from the
// API server carrying "file" is still an API pod, never a static one), and
// drops, by the rule for unusable pods below, nil pods and pods without a
// UID and, except from an OpRemove (of which only the UIDs are read),
// mirror pods from a source other than the API server and pods repeating
// the full name or UID of an earlier pod of the update. It then counts
// u.Source as seen (SourcesReady).
//
// Run calls it for each update it receives; an agent with its own loop may
// call it directly, from any goroutine (calls are serialized). It returns
// an error, and does nothing, for an empty source or an unknown operation.
// Problems with single pods are logged and recorded, not returned.
func (h *Handler) Dispatch(ctx context.Context, u podconfig.PodUpdate) error {
	if u.Source == "" {
		return fmt.Errorf("lifecycle: a %s update of %d pods has no source", u.Op, len(u.Pods))
	}
	if !u.Op.Valid() {
		return fmt.Errorf("lifecycle: update from source %q has unknown operation %d", u.Source, int(u.Op))
	}
	drop := h.dropper("source", u.Source, "op", u.Op.String())
	var pods []*v1.Pod
	if u.Op == podconfig.OpRemove {
		// Only the UIDs of removed pods matter.
		pods = sourcepods.Identified(u.Pods, drop)
	} else {
		pods = sourcepods.Valid(u.Source, u.Pods, drop)
	}
	for i, p := range pods {
		pods[i] = sourcepods.Stamp(p, u.Source)
	}
	h.log.V(2).Info("SyncLoop", "op", u.Op.String(), "source", u.Source, "pods", len(pods))
	switch u.Op {
	case podconfig.OpAdd:
		h.HandlePodAdditions(ctx, pods)
	case podconfig.OpUpdate, podconfig.OpDelete:
		h.HandlePodUpdates(ctx, pods)
	case podconfig.OpRemove:
		h.HandlePodRemoves(ctx, pods)
	case podconfig.OpReconcile:
		h.HandlePodReconcile(ctx, pods)
	}
	h.mu.Lock()
	h.seen[u.Source] = struct{}{}
	h.mu.Unlock()
	return nil
}

// The HandlePod* methods share one skeleton, apply; each says only how it
// records a pod in the store and what the pod's worker gets.
//
// Threading and ownership, for all five: call them from any goroutine; they
// are serialized with each other, Dispatch and Housekeeping. The pods are
// handed over (see podconfig.PodUpdate); the slice is neither kept nor
// modified. The caller stamps the config source annotation (Dispatch does).
//
// Unusable pods, for all five and Dispatch alike: a nil pod and a pod
// without a UID are dropped, each logged as an error (level 0) and, unless
// it is nil, recorded as a podconfig.ReasonFailedValidation Warning event;
// the other pods of the call are handled.

// HandlePodAdditions handles pods new to config, oldest first (by creation
// timestamp). Each pod is recorded in the store. A mirror pod then makes its
// static pod's worker see it (a SyncPodUpdate), if the static pod is known.
// Any other pod is admitted (unless its termination was already requested
// or it is in a terminal phase) and handed to its worker with a
// SyncPodCreate. A rejected pod stays in the store but never reaches the
// workers: the rejection is logged, recorded as a Warning event on the pod,
// and passed to Options.OnReject.
func (h *Handler) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	h.apply(ctx, pods, podChange{what: "addition", oldestFirst: true, record: h.store.AddPod,
		decide: func(ctx context.Context, t target) (podworker.UpdateType, bool) {
			if t.viaMirror {
				return h.mirrorChanged(t)
			}
			if !h.workers.IsPodTerminationRequested(t.pod.UID) && !podstatus.IsTerminal(t.pod.Status.Phase) {
				if r := h.admitPod(ctx, t.pod); !r.Admit {
					h.reject(ctx, t.pod, r)
					return 0, false
				}
				h.rejected.forget(t.pod.UID)
			}
			return podworker.SyncPodCreate, true
		}})
}

// HandlePodUpdates handles pods whose desired state changed, including
// graceful deletions: each is recorded in the store and its worker gets a
// SyncPodUpdate with the pod and its mirror pod (a mirror pod's update goes
// to its static pod; one without a static pod is skipped). Pods admission
// rejected are recorded but not sent.
func (h *Handler) HandlePodUpdates(ctx context.Context, pods []*v1.Pod) {
	h.apply(ctx, pods, podChange{what: "update", record: h.store.UpdatePod,
		decide: func(_ context.Context, t target) (podworker.UpdateType, bool) {
			if t.viaMirror {
				return h.mirrorChanged(t)
			}
			if h.isRejected(t) {
				return 0, false
			}
			return podworker.SyncPodUpdate, true
		}})
}

// HandlePodRemoves handles pods config no longer has: each is removed from
// the store. A removed mirror pod makes its static pod's worker see the
// change (a SyncPodUpdate; housekeeping recreates the mirror). Any other pod
// is killed (a SyncPodKill with its own grace period), but only once the
// sources are ready (SourcesReady); before that, housekeeping kills it
// later as an orphan. Pods admission rejected are only forgotten. Only the
// pods' UIDs are read.
func (h *Handler) HandlePodRemoves(ctx context.Context, pods []*v1.Pod) {
	h.apply(ctx, pods, podChange{what: "removal", record: h.store.RemovePod,
		decide: func(_ context.Context, t target) (podworker.UpdateType, bool) {
			if t.viaMirror {
				return h.mirrorChanged(t)
			}
			if h.rejected.forget(t.pod.UID) {
				return 0, false
			}
			if !h.SourcesReady() {
				h.log.V(4).Info("Not killing removed pod: the config sources are not all ready; housekeeping will", "pod", mirror.PodFullName(t.pod), "podUID", t.pod.UID)
				return 0, false
			}
			h.log.V(4).Info("Pod was removed from config and must be killed", "pod", mirror.PodFullName(t.pod), "podUID", t.pod.UID)
			return podworker.SyncPodKill, true
		}})
}

// HandlePodReconcile handles pods of which only the status changed: each is
// recorded in the store, and its worker gets a SyncPodSync if the pod has
// readiness gates and its Ready condition disagrees with what its
// containers and gates say (the agent's status writer must correct it). A
// mirror pod stands for its static pod.
func (h *Handler) HandlePodReconcile(ctx context.Context, pods []*v1.Pod) {
	h.apply(ctx, pods, podChange{what: "reconcile", record: h.store.UpdatePod,
		decide: func(_ context.Context, t target) (podworker.UpdateType, bool) {
			if h.isRejected(t) || !readinessNeedsReconcile(t.pod) {
				return 0, false
			}
			return podworker.SyncPodSync, true
		}})
}

// HandlePodSyncs asks the workers to sync pods again (a SyncPodSync), for
// instance after a runtime event. Mirror pods are skipped (sync the static
// pod instead), as are pods admission rejected. The store is not written;
// the pod's mirror pod is looked up in it.
func (h *Handler) HandlePodSyncs(ctx context.Context, pods []*v1.Pod) {
	h.apply(ctx, pods, podChange{what: "sync",
		decide: func(_ context.Context, t target) (podworker.UpdateType, bool) {
			if t.viaMirror {
				h.log.V(4).Info("HandlePodSyncs was given a mirror pod; sync its static pod instead", "mirrorPod", mirror.PodFullName(t.mirrorPod))
				return 0, false
			}
			if h.isRejected(t) {
				return 0, false
			}
			return podworker.SyncPodSync, true
		}})
}

// podChange is what one HandlePod* method does with each of its pods.
type podChange struct {
	// what names the method's pods in logs: "addition", "update", ...
	what string
	// oldestFirst handles the pods by creation timestamp, oldest first.
	oldestFirst bool
	// record writes the pod to the store before it is resolved; nil
	// leaves the store alone.
	record func(*v1.Pod)
	// decide says which update, if any, the pod's worker gets. It runs
	// under the loop lock and may log, admit and reject.
	decide func(ctx context.Context, t target) (podworker.UpdateType, bool)
}

// target is one pod of a HandlePod* call, resolved through the store to the
// pod a worker runs.
type target struct {
	// pod is the pod a worker runs: the given pod, or the static pod of a
	// given mirror pod. It is nil only for a mirror pod without a static
	// pod, which apply skips.
	pod *v1.Pod
	// mirrorPod is pod's mirror pod, if the store has one.
	mirrorPod *v1.Pod
	// viaMirror: the given pod was a mirror pod (its change is a change of
	// its static pod).
	viaMirror bool
}

// apply is the skeleton of the HandlePod* methods: under the loop lock it
// drops the pods that cannot be used, records each other one with
// c.record, resolves it to its target (skipping a mirror pod whose static
// pod is unknown), and sends the target's worker the update c.decide picks,
// all stamped with one start time. A kill carries no mirror pod.
func (h *Handler) apply(ctx context.Context, pods []*v1.Pod, c podChange) {
	h.loop.Lock()
	defer h.loop.Unlock()
	start := h.clock.Now()
	pods = sourcepods.Identified(pods, h.dropper("call", "HandlePod* ("+c.what+")"))
	if c.oldestFirst {
		slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
			return a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time)
		})
	}
	for _, given := range pods {
		if c.record != nil {
			c.record(given)
		}
		pod, mirrorPod, viaMirror := h.store.GetPodAndMirrorPod(given)
		if pod == nil {
			h.log.V(4).Info("Mirror pod has no static pod; skipping its "+c.what, "mirrorPod", mirror.PodFullName(mirrorPod), "mirrorPodUID", mirrorPod.UID)
			continue
		}
		t := target{pod: pod, mirrorPod: mirrorPod, viaMirror: viaMirror}
		updateType, ok := c.decide(ctx, t)
		if !ok {
			continue
		}
		if updateType == podworker.SyncPodKill {
			t.mirrorPod = nil
		}
		h.update(ctx, updateType, t.pod, t.mirrorPod, start)
	}
}

// mirrorChanged is the rule for a mirror pod added, updated or removed: it
// is an update of its static pod (the worker sees the new mirror, or its
// absence), unless admission rejected that pod.
func (h *Handler) mirrorChanged(t target) (podworker.UpdateType, bool) {
	if h.isRejected(t) {
		return 0, false
	}
	return podworker.SyncPodUpdate, true
}

// isRejected reports, and logs at V(4), that admission rejected the
// target's pod, so its changes are not sent.
func (h *Handler) isRejected(t target) bool {
	if !h.rejected.has(t.pod.UID) {
		return false
	}
	h.log.V(4).Info("Pod was rejected by admission; not syncing it", "pod", mirror.PodFullName(t.pod), "podUID", t.pod.UID)
	return true
}

// dropper returns the Handler's rule for an unusable pod (see the
// HandlePod* methods): an error log line carrying keysAndValues, and a
// podconfig.ReasonFailedValidation Warning event for a pod that is not nil.
func (h *Handler) dropper(keysAndValues ...any) sourcepods.Drop {
	return func(i int, pod *v1.Pod, reason string) {
		h.log.Error(errors.New("lifecycle: "+reason), "Ignoring an unusable pod", append([]any{"index", i}, keysAndValues...)...)
		if pod != nil {
			h.recorder.Eventf(pod, v1.EventTypeWarning, podconfig.ReasonFailedValidation, "%s", reason)
		}
	}
}
