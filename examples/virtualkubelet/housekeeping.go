package virtualkubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

func (p *Provider) housekeepingLoop(ctx context.Context) {
	t := p.opts.Clock.NewTicker(p.opts.HousekeepingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			p.housekeeping(ctx)
		}
	}
}

// housekeeping is one pass of the loop, as the kubelet's: stop pods whose
// API object vanished unnoticed (with a grace period of 1 second, as for
// DeletePod without a deletion timestamp); tell the engine which pods are
// desired (those whose API object still exists), so it forgets finished
// pods nobody wants; drop the provider's records of what it forgot; and
// stop backend pods that no pod owns.
func (p *Provider) housekeeping(ctx context.Context) {
	p.mu.Lock()
	desired := make([]*v1.Pod, 0, len(p.entries))
	for uid, e := range p.entries {
		switch {
		case p.apiHas(e.pod, e):
			desired = append(desired, e.pod)
		case !e.gone:
			// The API object vanished and no DeletePod said so (virtual-
			// kubelet removes pods whose status shows nothing running
			// without calling DeletePod): its grace period is over.
			p.goneLocked(ctx, uid, e)
		}
	}
	known := p.workers.SyncKnownPods(desired)
	for uid, e := range p.entries {
		if _, ok := known[uid]; ok {
			continue
		}
		delete(p.entries, uid)
		if key := podKey(e.pod); p.names[key] == uid {
			delete(p.names, key)
		}
		if p.queue != nil {
			p.queue.Forget(uid)
		}
	}
	p.mu.Unlock()

	if p.lister == nil {
		return
	}
	remote, err := p.lister.List(ctx)
	if err != nil {
		p.opts.Logger.Error(err, "Listing the backend's pods for orphans; will try again")
		return
	}
	for _, rp := range remote {
		if _, ok := known[rp.UID]; ok || p.owned(rp.UID) || p.adoptable(rp) {
			continue
		}
		err := p.workers.UpdatePod(ctx, podworker.UpdatePodOptions{
			UpdateType: podworker.SyncPodKill,
			RunningPod: &podworker.RuntimePod{UID: rp.UID, Namespace: rp.Namespace, Name: rp.Name},
		})
		if err != nil {
			return
		}
		p.opts.Logger.V(2).Info("Stopping a backend pod no pod owns", "podUID", rp.UID, "pod", nameKey(rp.Namespace, rp.Name))
	}
}

// owned reports whether the provider was given the pod since housekeeping
// asked the engine.
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
