package lifecycle

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/lifecycle/internal/sourcepods"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// Dispatch hands one config update to the matching handler: OpAdd to
// HandlePodAdditions, OpUpdate and OpDelete to HandlePodUpdates (a graceful
// deletion is an update carrying the deletion grace period), OpRemove to
// HandlePodRemoves, OpReconcile to HandlePodReconcile. It then counts
// u.Source as seen (SourcesReady).
//
// The pods of an update a podconfig.Config made (u.FromConfig) already
// passed the rules for source pods when it merged them, and go to the
// handler as they are. Any other update's pods go through the same rules
// here, once: each is stamped with the kubernetes.io/config.source
// annotation naming u.Source (copying the pod when it said otherwise: a pod
// from the API server carrying "file" is still an API pod, never a static
// one), and, by the rule for unusable pods below, nil pods and pods without
// a UID are dropped, and, except from an OpRemove (of which only the UIDs
// are read), mirror pods from a source other than the API server and pods
// repeating the full name or UID of an earlier pod of the update.
//
// Run calls it for each update it receives; an agent with its own loop may
// call it directly, from any goroutine (calls are serialized). It returns
// an error, and does nothing, for an empty source or an unknown operation.
// Problems with single pods are logged and recorded, not returned.
func (l *SyncLoop) Dispatch(ctx context.Context, u podconfig.PodUpdate) error {
	if u.Source == "" {
		return fmt.Errorf("lifecycle: a %s update of %d pods has no source", u.Op, len(u.Pods))
	}
	if !u.Op.Valid() {
		return fmt.Errorf("lifecycle: update from source %q has unknown operation %d", u.Source, int(u.Op))
	}
	pods := u.Pods
	if !u.FromConfig() {
		drop := l.dropper("source", u.Source, "op", u.Op.String())
		if u.Op == podconfig.OpRemove {
			// Only the UIDs of removed pods matter.
			pods = sourcepods.Identified(pods, drop)
		} else {
			pods = sourcepods.Valid(u.Source, pods, drop)
		}
		for i, p := range pods {
			pods[i] = sourcepods.Stamp(p, u.Source)
		}
	}
	l.log.V(2).Info("SyncLoop", "op", u.Op.String(), "source", u.Source, "pods", len(pods))
	switch u.Op {
	case podconfig.OpAdd:
		l.apply(ctx, pods, l.additions())
	case podconfig.OpUpdate, podconfig.OpDelete:
		l.apply(ctx, pods, l.updates())
	case podconfig.OpRemove:
		l.apply(ctx, pods, l.removals())
	case podconfig.OpReconcile:
		l.apply(ctx, pods, l.reconciles())
	}
	l.mu.Lock()
	l.seen[u.Source] = struct{}{}
	l.mu.Unlock()
	return nil
}

// The HandlePod* methods share one skeleton, apply; each says only how it
// records a pod in the store and what the pod's worker gets.
//
// Threading and ownership, for all four: call them from any goroutine; they
// are serialized with each other, Dispatch and Housekeeping. The pods are
// handed over (see podconfig.PodUpdate); the slice is neither kept nor
// modified. The caller stamps the config source annotation (Dispatch does).
//
// Unusable pods, for all four and Dispatch alike (and podconfig.Config,
// for the pods it drops): a nil pod and a pod without a UID are dropped,
// each logged as an error (level 0) and, unless it is nil, recorded as a
// podconfig.ReasonFailedValidation Warning event; the other pods of the
// call are handled. Each path applies the rule once.

// HandlePodAdditions handles pods new to config, oldest first (by creation
// timestamp). Each pod is recorded in the store. A mirror pod then makes its
// static pod's worker see it (a SyncPodUpdate), if the static pod is known.
// Any other pod is admitted (unless its termination was already requested
// or it is in a terminal phase) and handed to its worker with a
// SyncPodCreate. A rejected pod stays in the store but never reaches the
// workers: the rejection is logged, recorded as a Warning event on the pod,
// and passed to SyncLoopOptions.OnReject.
func (l *SyncLoop) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	l.apply(ctx, l.identified(pods, "HandlePodAdditions"), l.additions())
}

// HandlePodUpdates handles pods whose desired state changed, including
// graceful deletions: each is recorded in the store and its worker gets a
// SyncPodUpdate with the pod and its mirror pod (a mirror pod's update goes
// to its static pod; one without a static pod is skipped). Pods admission
// rejected are recorded but not sent.
func (l *SyncLoop) HandlePodUpdates(ctx context.Context, pods []*v1.Pod) {
	l.apply(ctx, l.identified(pods, "HandlePodUpdates"), l.updates())
}

// HandlePodRemoves handles pods config no longer has: each is removed from
// the store. A removed mirror pod makes its static pod's worker see the
// change (a SyncPodUpdate; housekeeping recreates the mirror). Any other pod
// is killed (a SyncPodKill with its own grace period), but only once the
// sources are ready (SourcesReady); before that, housekeeping kills it
// later as an orphan. Pods admission rejected are only forgotten. Only the
// pods' UIDs are read.
func (l *SyncLoop) HandlePodRemoves(ctx context.Context, pods []*v1.Pod) {
	l.apply(ctx, l.identified(pods, "HandlePodRemoves"), l.removals())
}

// HandlePodReconcile handles pods of which only the status changed: each is
// recorded in the store, and its worker gets a SyncPodSync if the pod has
// readiness gates and its Ready condition disagrees with what its
// containers and gates say (the agent's status writer must correct it). A
// mirror pod stands for its static pod.
func (l *SyncLoop) HandlePodReconcile(ctx context.Context, pods []*v1.Pod) {
	l.apply(ctx, l.identified(pods, "HandlePodReconcile"), l.reconciles())
}

// identified applies the rule for unusable pods to the pods handed to the
// HandlePod* method named call, the one check of that path.
func (l *SyncLoop) identified(pods []*v1.Pod, call string) []*v1.Pod {
	return sourcepods.Identified(pods, l.dropper("call", call))
}

// additions is what HandlePodAdditions does with each pod.
func (l *SyncLoop) additions() podChange {
	return podChange{what: "addition", oldestFirst: true, store: storeSet,
		decide: func(ctx context.Context, t target) (podworker.UpdateType, bool) {
			if t.viaMirror {
				return l.mirrorChanged(t)
			}
			if !l.workers.IsPodTerminationRequested(t.pod.UID) && !podstatus.IsTerminal(t.pod.Status.Phase) && !l.admit(ctx, t.pod) {
				return 0, false
			}
			return podworker.SyncPodCreate, true
		}}
}

// updates is what HandlePodUpdates does with each pod.
func (l *SyncLoop) updates() podChange {
	return podChange{what: "update", store: storeSet,
		decide: func(_ context.Context, t target) (podworker.UpdateType, bool) {
			if t.viaMirror {
				return l.mirrorChanged(t)
			}
			if l.isRejected(t) {
				return 0, false
			}
			return podworker.SyncPodUpdate, true
		}}
}

// removals is what HandlePodRemoves does with each pod.
func (l *SyncLoop) removals() podChange {
	return podChange{what: "removal", store: storeRemove,
		decide: func(_ context.Context, t target) (podworker.UpdateType, bool) {
			if t.viaMirror {
				return l.mirrorChanged(t)
			}
			if l.rejected.forget(t.pod.UID) {
				return 0, false
			}
			if !l.SourcesReady() {
				l.log.V(4).Info("Not killing removed pod: the config sources are not all ready; housekeeping will", "pod", mirror.PodFullName(t.pod), "podUID", t.pod.UID)
				return 0, false
			}
			l.log.V(4).Info("Pod was removed from config and must be killed", "pod", mirror.PodFullName(t.pod), "podUID", t.pod.UID)
			return podworker.SyncPodKill, true
		}}
}

// reconciles is what HandlePodReconcile does with each pod.
func (l *SyncLoop) reconciles() podChange {
	return podChange{what: "reconcile", store: storeSet,
		decide: func(_ context.Context, t target) (podworker.UpdateType, bool) {
			if l.isRejected(t) || !readinessNeedsReconcile(t.pod) {
				return 0, false
			}
			return podworker.SyncPodSync, true
		}}
}

// podChange is what one HandlePod* method does with each of its pods.
type podChange struct {
	// what names the method's pods in logs: "addition", "update", ...
	what string
	// oldestFirst handles the pods by creation timestamp, oldest first.
	oldestFirst bool
	// store says how the pod is written to the store before it is
	// resolved.
	store storeWrite
	// decide says which update, if any, the pod's worker gets. It runs
	// under the loop lock and may log, admit and reject.
	decide func(ctx context.Context, t target) (podworker.UpdateType, bool)
}

// storeWrite is what a podChange does to the store.
type storeWrite int

const (
	// storeSet records the pod (PodStoreWriter.SetPod).
	storeSet storeWrite = iota
	// storeRemove forgets the pod (PodStoreWriter.RemovePod).
	storeRemove
)

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
// writes each pod (already checked by its caller) to the store as c.store
// says, resolves it to its target (skipping a mirror pod whose static pod
// is unknown), and sends the target's worker the update c.decide picks,
// all stamped with one start time. A kill carries no mirror pod. The
// PodObservers hear of each pod a worker was given, unless it was a kill.
func (l *SyncLoop) apply(ctx context.Context, pods []*v1.Pod, c podChange) {
	l.loop.Lock()
	defer l.loop.Unlock()
	start := l.clock.Now()
	if c.oldestFirst {
		pods = slices.Clone(pods)
		slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
			return a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time)
		})
	}
	for _, given := range pods {
		switch c.store {
		case storeSet:
			l.store.SetPod(given)
		case storeRemove:
			l.store.RemovePod(given)
		}
		pod, mirrorPod, viaMirror := l.store.GetPodAndMirrorPod(given)
		if pod == nil {
			l.log.V(4).Info("Mirror pod has no static pod; skipping its "+c.what, "mirrorPod", mirror.PodFullName(mirrorPod), "mirrorPodUID", mirrorPod.UID)
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
		if l.send(ctx, podworker.UpdatePodOptions{UpdateType: updateType, Pod: t.pod, MirrorPod: t.mirrorPod, StartTime: start}) && updateType != podworker.SyncPodKill {
			l.observeLocked(t.pod)
		}
	}
}

// mirrorChanged is the rule for a mirror pod added, updated or removed: it
// is an update of its static pod (the worker sees the new mirror, or its
// absence), unless admission rejected that pod.
func (l *SyncLoop) mirrorChanged(t target) (podworker.UpdateType, bool) {
	if l.isRejected(t) {
		return 0, false
	}
	return podworker.SyncPodUpdate, true
}

// isRejected reports, and logs at V(4), that admission rejected the
// target's pod, so its changes are not sent.
func (l *SyncLoop) isRejected(t target) bool {
	if !l.rejected.has(t.pod.UID) {
		return false
	}
	l.log.V(4).Info("Pod was rejected by admission; not syncing it", "pod", mirror.PodFullName(t.pod), "podUID", t.pod.UID)
	return true
}

// dropper returns the rule for an unusable pod (see the HandlePod*
// methods), reporting keysAndValues with each.
func (l *SyncLoop) dropper(keysAndValues ...any) sourcepods.Drop {
	return sourcepods.Reporter(l.log, l.recorder, keysAndValues...)
}
