package lifecycle

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// RuntimePodLister lists the pods the container runtime has, so
// housekeeping can kill those no pod worker knows (left over from before the
// agent started, or from a crash). It is optional: without it that step is
// skipped.
type RuntimePodLister interface {
	// ListRuntimePods returns every pod that has a container or sandbox in
	// the runtime, running or not yet removed. It is called from the sync
	// loop's goroutine during Housekeeping, must honour ctx, and must not
	// call the Handler's Handle*, Dispatch or Housekeeping methods. The
	// slice is the caller's. An error makes housekeeping skip the steps
	// that need the list (it is returned by Housekeeping); the other steps
	// still run.
	ListRuntimePods(ctx context.Context) ([]podworker.RuntimePod, error)
}

// RuntimePodListerFunc adapts a function to a RuntimePodLister.
type RuntimePodListerFunc func(ctx context.Context) ([]podworker.RuntimePod, error)

// ListRuntimePods calls f.
func (f RuntimePodListerFunc) ListRuntimePods(ctx context.Context) ([]podworker.RuntimePod, error) {
	return f(ctx)
}

var _ RuntimePodLister = RuntimePodListerFunc(nil)

// Housekeeping brings the pod workers, the runtime and the mirror pods back
// in line with the desired pods. In order:
//
//  1. SyncKnownPods with every desired pod (rejected ones included): the
//     workers forget finished pods that are no longer desired or are to be
//     restarted, and start terminating live pods no longer desired.
//  2. Forget the rejection of pods that left the store.
//  3. Delete the mirror pods whose static pod is gone (by full name),
//     unless that static pod is still terminating
//     (IsPodForMirrorPodTerminatingByFullName): the mirror stays until it
//     is terminated, so the API server shows the pod until it is gone.
//  4. Re-add, with a SyncPodCreate, every active pod the workers do not
//     know: a static pod whose UID was reused once its previous life
//     finished, or a worker forgotten early. This comes before step 6 so
//     such a pod is restarted rather than killed as an orphan. Skipped
//     once ShutdownNode was called.
//  5. Keep mirror pods in step (when Options.MirrorClient is set): for each
//     static pod that has started and is not terminating, delete a mirror
//     that is stale (another hash) or being deleted, passing its UID, and
//     create one when there is none (or the stale one was deleted).
//  6. With Options.RuntimePods: kill deleted pods in a terminal phase that
//     no worker knows and the runtime does not have (so their deletion can
//     complete), and kill every runtime pod no worker knows (a RunningPod
//     kill with a grace period of 1 second).
//
// Run calls it every Options.HousekeepingInterval once the sources are
// ready; an agent with its own loop calls it the same way, and must check
// SourcesReady first (Housekeeping itself does not: called early it would
// take the pods of a silent source for orphans). It is serialized
// with Dispatch and the Handle* methods. Failures of single steps are
// logged (mirror failures also recorded as events) and retried on the next
// call; the returned error, prefixed "lifecycle: ", reports that listing
// the runtime pods failed (step 6 was skipped; podkit runs steps 1 to 5
// anyway, where the kubelet would stop).
func (h *Handler) Housekeeping(ctx context.Context) error {
	h.loop.Lock()
	defer h.loop.Unlock()

	pods, mirrorPods, orphanedMirrors := h.store.GetPodsAndMirrorPods()
	working := h.workers.SyncKnownPods(pods)

	desired := make(map[types.UID]struct{}, len(pods))
	for _, p := range pods {
		desired[p.UID] = struct{}{}
	}
	h.rejected.retain(func(uid types.UID) bool {
		_, ok := desired[uid]
		return ok
	})

	h.deleteOrphanedMirrors(ctx, orphanedMirrors, mirrorPods)

	if !h.shuttingDown.Load() {
		for _, p := range pods {
			if _, known := working[p.UID]; known || h.isInactive(p) {
				continue
			}
			pod, mirrorPod, wasMirror := h.store.GetPodAndMirrorPod(p)
			if pod == nil || wasMirror {
				continue
			}
			h.log.V(4).Info("Restarting a desired pod the workers do not know (its UID was reused, or its worker was forgotten)", "pod", mirror.PodFullName(pod), "podUID", pod.UID)
			if h.send(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod, MirrorPod: mirrorPod, StartTime: h.clock.Now()}) {
				working[pod.UID] = podworker.PodWorkerSync{State: podworker.Syncing, HasConfig: true, Static: mirror.IsStaticPod(pod)}
			}
		}
	}

	h.syncMirrorPods(ctx, pods)

	if h.runtime == nil {
		return nil
	}
	running, err := h.runtime.ListRuntimePods(ctx)
	if err != nil {
		h.log.Error(err, "Housekeeping could not list the runtime pods; orphans are left for the next run")
		return fmt.Errorf("lifecycle: housekeeping: listing runtime pods: %w", err)
	}
	inRuntime := make(map[types.UID]struct{}, len(running))
	for _, rp := range running {
		inRuntime[rp.UID] = struct{}{}
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil || !podstatus.IsTerminal(p.Status.Phase) || mirror.IsMirrorPod(p) {
			continue
		}
		if _, known := working[p.UID]; known {
			continue
		}
		if _, ok := inRuntime[p.UID]; ok {
			continue
		}
		h.log.V(4).Info("Completing the termination of a deleted terminal pod no worker knows", "pod", mirror.PodFullName(p), "podUID", p.UID)
		if h.send(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: p, StartTime: h.clock.Now()}) {
			working[p.UID] = podworker.PodWorkerSync{State: podworker.Terminating, HasConfig: true, Static: mirror.IsStaticPod(p)}
		}
	}
	one := int64(1)
	for _, rp := range running {
		if _, known := working[rp.UID]; known || rp.UID == "" {
			continue
		}
		h.log.V(4).Info("Killing a runtime pod no worker knows", "pod", mirror.BuildPodFullName(rp.Name, rp.Namespace), "podUID", rp.UID)
		if h.send(ctx, podworker.UpdatePodOptions{
			UpdateType:     podworker.SyncPodKill,
			RunningPod:     &rp,
			KillPodOptions: &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: &one},
			StartTime:      h.clock.Now(),
		}) {
			working[rp.UID] = podworker.PodWorkerSync{State: podworker.Terminating, Orphan: true}
		}
	}
	return nil
}
