package virtualkubelet

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// GetPod returns the pod that holds namespace/name, with its newest
// status, from the provider's records (no backend call). It answers for a
// pod from the moment it is handed over until the engine forgets it — while
// it runs, while it stops after a deletion, and once it has finished, so
// that its final status can be written — except when its name has passed
// to another pod:
//
//   - with Options.Pods, when the API server holds the name under another
//     UID (the pod's API object is gone and a successor took the name);
//   - without it, as soon as the pod's deletion was requested, the only
//     moment the provider can tell that a successor may come;
//   - and when the provider learned that the pod's API object is gone.
//
// virtual-kubelet compares what GetPod returns with a pod of the same name
// to decide between CreatePod and UpdatePod, so a successor must not be
// answered with its predecessor. The error for a missing pod satisfies
// errdefs.IsNotFound. The pod is the caller's.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*v1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, e := p.holderLocked(namespace, name)
	if e == nil {
		return nil, errdefs.NotFoundf("virtualkubelet: pod %s/%s is not running here", namespace, name)
	}
	return e.snapshot(), nil
}

// GetPodStatus returns the current status of the pod GetPod answers for:
// read from the backend while the engine's window says its containers may
// run, the recorded final status after that. It is NotFound (errdefs) when
// GetPod is, and fails when the backend does. It keeps answering for a pod
// whose deletion was requested until the pod is forgotten: virtual-kubelet
// (for providers that are not a PodNotifier) turns a NotFound for a pod it
// knows into a Failed status, which would overwrite a Succeeded one.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*v1.PodStatus, error) {
	p.mu.Lock()
	uid, e := p.holderLocked(namespace, name)
	if e == nil {
		p.mu.Unlock()
		return nil, errdefs.NotFoundf("virtualkubelet: pod %s/%s is not running here", namespace, name)
	}
	pod, final := e.snapshot(), e.final
	p.mu.Unlock()
	if final || !p.workers.CouldHaveRunningContainers(uid) {
		return &pod.Status, nil
	}
	rp, err := p.backend.Status(ctx, uid)
	switch {
	case errors.Is(err, ErrNotFound):
		rp = nil
	case err != nil:
		return nil, fmt.Errorf("virtualkubelet: reading the status of pod %s/%s: %w", namespace, name, err)
	}
	st := podStatus(pod, rp)
	return &st, nil
}

// holderLocked returns the pod GetPod answers for under namespace/name, or
// a nil entry.
func (p *Provider) holderLocked(namespace, name string) (types.UID, *entry) {
	uid := p.names[nameKey(namespace, name)]
	e := p.entries[uid]
	if e == nil || e.gone {
		return "", nil
	}
	if p.api == nil {
		if e.deleting {
			return "", nil
		}
		return uid, e
	}
	if cur, err := p.api.Pods(namespace).Get(name); err == nil && cur.UID != uid {
		return "", nil
	}
	return uid, e
}

// snapshot returns a copy of the pod with its newest status.
func (e *entry) snapshot() *v1.Pod {
	pod := e.pod.DeepCopy()
	if e.status != nil {
		pod.Status = *e.status.DeepCopy()
	}
	return pod
}

// GetPods returns the pods that run on the provider, as virtual-kubelet
// documents it (and serves it as /runningpods): those the engine's window
// says may have running containers — handed over and not yet started,
// running, or still stopping — with their newest status; a pod whose
// containers have all stopped, or that is terminated, is not listed, even
// while its API object remains. When the backend can list, the backend's
// running pods that the provider does not know are listed too (with only
// UID, namespace, name, containers and status), so that virtual-kubelet's
// start-up reconciliation deletes those the API server does not have. The
// pods are the caller's, ordered by namespace and name.
func (p *Provider) GetPods(ctx context.Context) ([]*v1.Pod, error) {
	var remote []RemotePod
	if p.lister != nil {
		var err error
		if remote, err = p.lister.List(ctx); err != nil {
			return nil, fmt.Errorf("virtualkubelet: listing the backend's pods: %w", err)
		}
	}
	p.mu.Lock()
	out := make([]*v1.Pod, 0, len(p.entries)+len(remote))
	for uid, e := range p.entries {
		if p.mayRunLocked(uid, e) {
			out = append(out, e.snapshot())
		}
	}
	for i := range remote {
		rp := &remote[i]
		if p.entries[rp.UID] != nil || !rp.Running() {
			continue
		}
		out = append(out, remoteOnlyPod(rp))
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if a, b := podKey(out[i]), podKey(out[j]); a != b {
			return a < b
		}
		return out[i].UID < out[j].UID
	})
	return out, nil
}

// mayRunLocked reports whether the pod of e may have running containers:
// not yet seen by the engine (the source has yet to send it) unless its API
// object is gone, or, once the engine has it, inside the window's
// CouldHaveRunningContainers and without a final status.
func (p *Provider) mayRunLocked(uid types.UID, e *entry) bool {
	if e.final {
		return false
	}
	if _, known := p.workers.Pod(uid); !known {
		return !e.gone
	}
	return p.workers.CouldHaveRunningContainers(uid)
}

// remoteOnlyPod is the API view of a backend pod the provider does not
// know.
func remoteOnlyPod(rp *RemotePod) *v1.Pod {
	pod := &v1.Pod{}
	pod.UID, pod.Namespace, pod.Name = rp.UID, rp.Namespace, rp.Name
	for _, c := range rp.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c.Name, Image: c.Image})
	}
	pod.Status = podStatus(pod, rp)
	return pod
}
