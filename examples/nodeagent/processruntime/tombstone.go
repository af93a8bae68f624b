package processruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// SyncTerminatedPod releases the pod's resources: its scratch directory,
// volumes, cgroups and sandbox (its range of host IDs is free again) are
// removed and the pod leaves RuntimePods. What is left is its
// tombstone: the container logs (ReadLogs) and the containers' final states
// (PodStatus), kept while config still has the pod, until PruneTombstones
// removes them. A SyncPod for the UID afterwards (the engine restarting it)
// starts it clean. A restarted agent reads the tombstone back, so a pod
// that finished is not run again (see SyncPod).
//
// It is idempotent. It fails, changing nothing, while any process of the
// pod still runs (SyncTerminatingPod must succeed first), and when the
// tombstone cannot be recorded (it is retried). status is not used.
func (r *Runtime) SyncTerminatedPod(_ context.Context, pod *v1.Pod, _ PodStatus) (err error) {
	if r.closed() {
		return ErrClosed
	}
	if err := validUID(pod.UID); err != nil {
		return fmt.Errorf("processruntime: %w", err)
	}
	// After the unlock below: the features ask the engine's window.
	defer func() {
		if err == nil {
			r.terminatedFeatures(pod.UID)
		}
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[pod.UID]
	if p == nil {
		// Never synced (or pruned already): there is nothing to keep.
		if err := os.RemoveAll(r.PodDir(pod.UID)); err != nil {
			return fmt.Errorf("processruntime: removing the directory of pod %s: %w", podName(pod), err)
		}
		return nil
	}
	if err := p.requireStoppedLocked(podName(pod)); err != nil {
		return err
	}
	if err := r.releaseSandboxLocked(p); err != nil {
		return err
	}
	if err := r.removePodCgroup(pod.UID); err != nil {
		return fmt.Errorf("processruntime: cleaning up pod %s: %w", podName(pod), err)
	}
	if err := r.limits.remove(pod.UID); err != nil {
		return fmt.Errorf("processruntime: cleaning up pod %s: %w", podName(pod), err)
	}
	p.limited = false
	if err := os.RemoveAll(filepath.Join(p.dir, scratchDir)); err != nil {
		return fmt.Errorf("processruntime: removing the scratch directory of pod %s: %w", podName(pod), err)
	}
	if !p.cleanedUp {
		p.cleanedUp = true
		if err := r.writePodRecordLocked(p); err != nil {
			p.cleanedUp = false
			return err
		}
	}
	p.terminating, p.stopped, p.earlier = true, true, false
	return nil
}

// requireStoppedLocked fails when a container process of the pod runs or
// is being started.
func (p *podState) requireStoppedLocked(name string) error {
	for _, c := range p.containers {
		if c.proc != nil || c.starting {
			return fmt.Errorf("processruntime: pod %s still has a running container %q; it must be terminated before it is cleaned up", name, c.rec.Name)
		}
	}
	return nil
}

// Tombstones lists the pods of which only a tombstone is left (logs and
// final container states, after SyncTerminatedPod), sorted by UID. The
// slice is the caller's.
func (r *Runtime) Tombstones() []podworker.RuntimePod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []podworker.RuntimePod
	for _, p := range r.pods {
		if p.cleanedUp {
			out = append(out, podworker.RuntimePod{UID: p.uid, Namespace: p.namespace, Name: p.name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// PruneTombstones removes the tombstones (see SyncTerminatedPod) of the
// pods keep does not want, and returns their UIDs. An agent calls it from
// its housekeeping with keep reporting whether config still has the UID, so
// a pod's logs last exactly as long as the pod is in config. It must only
// be called once every config source has delivered its pods: a tombstone
// removed while its pod is still wanted lets the pod run again after an
// agent restart. keep is called without the runtime's lock held. Pods that
// are not tombstones are never touched. The error joins the failures to
// remove a directory (those tombstones are kept, to be pruned next time).
func (r *Runtime) PruneTombstones(keep func(uid types.UID) bool) ([]types.UID, error) {
	if r.closed() {
		return nil, ErrClosed
	}
	var drop []types.UID
	for _, rp := range r.Tombstones() {
		if !keep(rp.UID) {
			drop = append(drop, rp.UID)
		}
	}
	var removed []types.UID
	var errs []error
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, uid := range drop {
		p := r.pods[uid]
		if p == nil || !p.cleanedUp {
			// SyncPod restarted the UID since keep was asked.
			continue
		}
		if err := os.RemoveAll(p.dir); err != nil {
			errs = append(errs, fmt.Errorf("processruntime: removing the tombstone of pod %s/%s (%s): %w", p.namespace, p.name, uid, err))
			continue
		}
		delete(r.pods, uid)
		removed = append(removed, uid)
		r.log.V(2).Info("Removed the tombstone of a pod config no longer has", "pod", uid)
	}
	return removed, errors.Join(errs...)
}
