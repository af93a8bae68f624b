package virtualkubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// housekeeping is the provider's part of the sync loop's housekeeping (the
// sync loop calls it as its RuntimePodLister, once per pass, after it
// told the engine which pods are desired, and only once the source has
// sent its first snapshot). It stops the pods whose API object vanished
// unnoticed (virtual-kubelet removes pods whose status shows nothing
// running without calling DeletePod): their grace period is over, as for
// DeletePod without a deletion timestamp. It then returns the backend's
// pods that no pod owns, which the sync loop kills as orphans, with
// lifecycle's one orphan kill (lifecycle.KillRuntimeOrphans: a grace
// period of 1 second, as the kubelet's). A backend pod that survived a
// restart and still has its API object is left out: virtual-kubelet will
// hand it over, and SyncPod adopts it.
func (p *Provider) housekeeping(ctx context.Context) ([]podworker.RuntimePod, error) {
	p.mu.Lock()
	for uid, e := range p.entries {
		if !e.gone && !p.apiHas(e.pod, e) {
			p.goneLocked(ctx, uid, e)
		}
	}
	p.mu.Unlock()

	if p.lister == nil {
		return nil, nil
	}
	remote, err := p.lister.List(ctx)
	if err != nil {
		p.opts.Logger.Error(err, "Listing the backend's pods for orphans; will try again")
		return nil, err
	}
	var orphans []podworker.RuntimePod
	for _, rp := range remote {
		if p.owned(rp.UID) || p.adoptable(rp) {
			continue
		}
		p.opts.Logger.V(2).Info("A backend pod no pod owns", "podUID", rp.UID, "pod", nameKey(rp.Namespace, rp.Name))
		orphans = append(orphans, podworker.RuntimePod{UID: rp.UID, Namespace: rp.Namespace, Name: rp.Name})
	}
	return orphans, nil
}

// owned reports whether the provider was given the pod and the engine has
// not forgotten it.
func (p *Provider) owned(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.entries[uid]
	return ok
}

// adoptable reports whether the API server has a pod with the backend
// pod's UID: virtual-kubelet will hand it over with CreatePod, and SyncPod
// then adopts the running pod instead of creating another. On a lister
// error the pod is spared until the next pass.
func (p *Provider) adoptable(rp RemotePod) bool {
	if p.api == nil {
		return false
	}
	cur, err := p.api.Pods(rp.Namespace).Get(rp.Name)
	if err != nil {
		return !apierrors.IsNotFound(err)
	}
	return cur.UID == rp.UID
}

// records keeps the provider's records in step with the engine: it is a
// lifecycle.PodObserver, which the sync loop tells of every pod whose
// worker the engine forgot (finished and no longer desired), whose record
// then goes too. It has nothing to run.
type records struct{ p *Provider }

// Run returns at once: the records need no loop.
func (records) Run(context.Context) error { return nil }

// PodUpdated needs nothing: the provider recorded the pod when it was
// given it.
func (records) PodUpdated(*v1.Pod) {}

// PodForgotten drops the record of uid, its name and its queued status.
func (r records) PodForgotten(uid types.UID) {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[uid]
	if e == nil {
		return
	}
	delete(p.entries, uid)
	if key := podKey(e.pod); p.names[key] == uid {
		delete(p.names, key)
	}
	if p.queue != nil {
		p.queue.Forget(uid)
	}
}
