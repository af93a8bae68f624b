package lifecycle

import (
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/podmanager"
)

// PodStoreReader is what the SyncLoop reads from the desired pods: the
// pods to run, and the pairing of static pods with their mirror pods by
// full name. *podmanager.Manager implements it; its method docs are the
// full contract (pairing by full name, for static pods only). The methods
// are called from the sync loop and from GetActivePods' callers, must be
// safe for concurrent use, must not block, and must return pods nobody
// modifies; the slices are the caller's.
type PodStoreReader interface {
	// GetPods returns every desired pod that is not a mirror pod.
	GetPods() []*v1.Pod
	// GetPodAndMirrorPod completes a pair: given a mirror pod, its static
	// pod (or nil), the mirror pod and true; given any other pod, that pod,
	// its mirror pod (or nil) and false.
	GetPodAndMirrorPod(pod *v1.Pod) (p, mirrorPod *v1.Pod, wasMirror bool)
	// GetMirrorPodByPod returns the mirror pod of the static pod pod.
	GetMirrorPodByPod(pod *v1.Pod) (*v1.Pod, bool)
	// GetPodsAndMirrorPods returns, from one consistent state, the pods,
	// the mirror pods, and the full names of the mirror pods that have no
	// static pod.
	GetPodsAndMirrorPods() (pods, mirrorPods []*v1.Pod, orphanedMirrorPodFullNames []string)
}

// PodStoreWriter is how the SyncLoop records config changes in the
// desired pods, mirror pods included. *podmanager.Manager implements it.
// The methods are called from the sync loop, must be safe for concurrent
// use, and must not modify the pods, which stay shared. (Its write is
// SetPod, not the kubelet's AddPod and UpdatePod, so that the only
// UpdatePod in the sync loop is the pod workers'.)
type PodStoreWriter interface {
	// SetPod records pod, replacing the pod with its UID if any: a pod new
	// to config, or a changed one.
	SetPod(pod *v1.Pod)
	// RemovePod forgets the pod with pod's UID, if any.
	RemovePod(pod *v1.Pod)
}

// PodStore is everything the SyncLoop needs from a store of desired pods:
// the two role interfaces above. *podmanager.Manager implements it; an
// agent may supply its own (one fed by an informer, say) as long as it
// keeps the rules documented on podmanager.Manager's methods.
type PodStore interface {
	PodStoreReader
	PodStoreWriter
}

var _ PodStore = (*podmanager.Manager)(nil)
