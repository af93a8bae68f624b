package lifecycle

import (
	"context"
	"fmt"
	"time"

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
	// call the SyncLoop's Handle*, Dispatch or Housekeeping methods. The
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
//  4. Re-add every active pod the workers do not know: a static pod whose
//     UID was reused once its previous life finished, or a worker forgotten
//     early. Such a pod starts anew, so it is admitted again, as a pod new
//     to the node (a node shutting down refuses it, see package
//     nodeshutdown), and handed to its worker with a SyncPodCreate. This
//     comes before step 6 so such a pod is restarted rather than killed as
//     an orphan.
//  5. Keep mirror pods in step (when SyncLoopOptions.MirrorClient is set):
//     for each static pod that has started and is not terminating, delete
//     a mirror that is stale (another hash) or being deleted, passing its
//     UID, and create one when there is none (or the stale one was
//     deleted).
//  6. With SyncLoopOptions.RuntimePods: kill deleted pods in a terminal
//     phase that no worker knows and the runtime does not have (so their
//     deletion can complete), and kill every runtime pod no worker knows
//     (KillRuntimeOrphans: a RunningPod kill with a grace period of 1
//     second).
//  7. Tell the PodObservers of the pods the workers forgot.
//
// Run calls it every SyncLoopOptions.HousekeepingInterval once the sources
// are ready; an agent with its own loop calls it the same way, and must check
// SourcesReady first (Housekeeping itself does not: called early it would
// take the pods of a silent source for orphans). It is serialized
// with Dispatch and the Handle* methods. Failures of single steps are
// logged (mirror failures also recorded as events) and retried on the next
// call; the returned error, prefixed "lifecycle: ", reports that listing
// the runtime pods failed (step 6 was skipped; podkit runs steps 1 to 5
// anyway, where the kubelet would stop).
func (l *SyncLoop) Housekeeping(ctx context.Context) error {
	l.loop.Lock()
	defer l.loop.Unlock()

	pods, mirrorPods, orphanedMirrors := l.store.GetPodsAndMirrorPods()
	working := l.workers.SyncKnownPods(pods)

	desired := make(map[types.UID]struct{}, len(pods))
	for _, p := range pods {
		desired[p.UID] = struct{}{}
	}
	l.rejected.retain(func(uid types.UID) bool {
		_, ok := desired[uid]
		return ok
	})

	l.deleteOrphanedMirrors(ctx, orphanedMirrors, mirrorPods)

	for _, p := range pods {
		if _, known := working[p.UID]; known || l.isInactive(p) {
			continue
		}
		pod, mirrorPod, wasMirror := l.store.GetPodAndMirrorPod(p)
		if pod == nil || wasMirror {
			continue
		}
		l.log.V(4).Info("Restarting a desired pod the workers do not know (its UID was reused, or its worker was forgotten)", "pod", mirror.PodFullName(pod), "podUID", pod.UID)
		if !l.admit(ctx, pod) {
			continue
		}
		if l.send(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod, MirrorPod: mirrorPod, StartTime: l.clock.Now()}) {
			working[pod.UID] = podworker.WorkerReport{Stage: podworker.StageNotStarted, HasConfig: true, Static: mirror.IsStaticPod(pod)}
			l.observeLocked(pod)
		}
	}
	defer l.forgetUnknownLocked(working)

	l.syncMirrorPods(ctx, pods)

	if l.runtime == nil {
		return nil
	}
	running, err := l.runtime.ListRuntimePods(ctx)
	if err != nil {
		l.log.Error(err, "Housekeeping could not list the runtime pods; orphans are left for the next run")
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
		l.log.V(4).Info("Completing the termination of a deleted terminal pod no worker knows", "pod", mirror.PodFullName(p), "podUID", p.UID)
		if l.send(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: p, StartTime: l.clock.Now()}) {
			working[p.UID] = podworker.WorkerReport{Stage: podworker.StageTerminationRequested, HasConfig: true, Static: mirror.IsStaticPod(p)}
		}
	}
	kill := func(ctx context.Context, opts podworker.UpdatePodOptions) error {
		rp := opts.RunningPod
		l.log.V(4).Info("Killing a runtime pod no worker knows", "pod", mirror.BuildPodFullName(rp.Name, rp.Namespace), "podUID", rp.UID)
		if !l.send(ctx, opts) {
			return errNotDelivered
		}
		return nil
	}
	for _, uid := range KillRuntimeOrphans(ctx, kill, working, running, l.clock.Now()) {
		working[uid] = podworker.WorkerReport{Stage: podworker.StageTerminationRequested, Orphan: true}
	}
	return nil
}

// OrphanGracePeriodSeconds is the grace period a runtime pod no worker
// knows is killed with (KillRuntimeOrphans): it has no spec to take one
// from, and the kubelet gives such pods 1 second.
const OrphanGracePeriodSeconds int64 = 1

// KillRuntimeOrphans is the one orphan kill of podkit: it calls update (the
// pod workers' UpdatePod) with a RunningPod kill, with a grace period of
// OrphanGracePeriodSeconds and start time now, for every pod of running
// whose UID is not a key of known (the workers' report from SyncKnownPods,
// plus the pods handed to them since) and not empty, and returns the UIDs
// whose kill update took. SyncLoop.Housekeeping calls it with the
// runtime's pods; an agent with a loop of its own (a virtual-kubelet
// provider, say) calls it the same way, after SyncKnownPods, and only
// once every config source has delivered its pods, so that nothing is
// taken for an orphan before it had a chance to be desired.
//
// A refused kill is not returned, and the others are still tried. update
// is called on the caller's goroutine (the pod workers' UpdatePod never
// blocks on hooks).
func KillRuntimeOrphans(ctx context.Context, update func(context.Context, podworker.UpdatePodOptions) error, known map[types.UID]podworker.WorkerReport, running []podworker.RuntimePod, now time.Time) []types.UID {
	var killed []types.UID
	for _, rp := range running {
		if _, ok := known[rp.UID]; ok || rp.UID == "" {
			continue
		}
		grace := OrphanGracePeriodSeconds
		err := update(ctx, podworker.UpdatePodOptions{
			UpdateType:     podworker.SyncPodKill,
			RunningPod:     &rp,
			KillPodOptions: &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: &grace},
			StartTime:      now,
		})
		if err == nil {
			killed = append(killed, rp.UID)
		}
	}
	return killed
}
