package lifecycle

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
)

// The mirror pod steps of Housekeeping: the kubelet does them in its
// SyncPod; podkit keeps them beside the rest of the loop's upkeep, so a
// PodSyncer never needs a MirrorPodClient.

// deleteOrphanedMirrors deletes the mirror pods whose static pod is gone,
// except those whose static pod is still terminating. Each delete names
// the UID of the mirror config has, so it never removes a newer object
// under that name, and works for a node identity that may no longer read
// the pod (see mirror.Client.DeleteMirrorPod).
func (l *SyncLoop) deleteOrphanedMirrors(ctx context.Context, fullNames []string, mirrorPods []*v1.Pod) {
	if l.mirrors == nil || len(fullNames) == 0 {
		return
	}
	uids := make(map[string]types.UID, len(mirrorPods))
	for _, m := range mirrorPods {
		uids[mirror.PodFullName(m)] = m.UID
	}
	for _, name := range fullNames {
		if l.workers.IsPodForMirrorPodTerminatingByFullName(name) {
			l.log.V(4).Info("Keeping the mirror pod of a static pod that is still terminating", "pod", name)
			continue
		}
		var uid *types.UID
		if u, ok := uids[name]; ok {
			uid = &u
		}
		deleted, err := l.mirrors.DeleteMirrorPod(ctx, name, uid)
		if err != nil {
			l.log.Error(err, "Deleting an orphaned mirror pod failed; housekeeping will retry", "pod", name)
			continue
		}
		if deleted {
			l.log.V(4).Info("Deleted orphaned mirror pod", "pod", name)
		}
	}
}

// syncMirrorPods makes each running static pod's mirror pod current.
func (l *SyncLoop) syncMirrorPods(ctx context.Context, pods []*v1.Pod) {
	if l.mirrors == nil {
		return
	}
	for _, p := range pods {
		if !mirror.IsStaticPod(p) || l.isInactive(p) {
			continue
		}
		info, ok := l.workers.Pod(p.UID)
		if !ok || !info.Started || info.TerminationRequested {
			continue
		}
		name := mirror.PodFullName(p)
		current, hasMirror := l.store.GetMirrorPodByPod(p)
		if hasMirror && (current.DeletionTimestamp != nil || !mirror.IsMirrorPodOf(current, p)) {
			uid := current.UID
			l.log.V(4).Info("Deleting a stale mirror pod", "pod", name, "mirrorPodUID", uid)
			deleted, err := l.mirrors.DeleteMirrorPod(ctx, name, &uid)
			if err != nil {
				l.log.Error(err, "Deleting a stale mirror pod failed; housekeeping will retry", "pod", name)
				l.recorder.Eventf(p, v1.EventTypeWarning, ReasonFailedMirrorPod, "Deleting the stale mirror pod of %s failed: %v", name, err)
				continue
			}
			if !deleted {
				// Already gone or replaced: wait for config to show it.
				continue
			}
		}
		if hasMirror && current.DeletionTimestamp == nil && mirror.IsMirrorPodOf(current, p) {
			continue
		}
		if err := l.mirrors.CreateMirrorPod(ctx, p); err != nil {
			l.log.Error(err, "Creating a mirror pod failed; housekeeping will retry", "pod", name)
			l.recorder.Eventf(p, v1.EventTypeWarning, ReasonFailedMirrorPod, "Creating the mirror pod of %s failed: %v", name, err)
			continue
		}
		l.log.V(4).Info("Mirror pod is in place", "pod", name)
	}
}
