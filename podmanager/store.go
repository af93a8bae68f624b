package podmanager

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodReader answers questions about the desired pods that are not mirror
// pods. Implementations must be safe for concurrent use. Returned pods must
// not be modified; returned slices belong to the caller.
type PodReader interface {
	// GetPods returns every desired pod that is not a mirror pod, in no
	// particular order.
	GetPods() []*v1.Pod
	// GetPodByUID returns the non-mirror pod with that UID.
	GetPodByUID(uid types.UID) (*v1.Pod, bool)
	// GetPodByFullName returns the non-mirror pod with that full name
	// ("name_namespace").
	GetPodByFullName(podFullName string) (*v1.Pod, bool)
	// TranslatePodUID returns the UID of the static pod when uid is the
	// UID of its mirror pod, and uid itself otherwise ("" stays "").
	TranslatePodUID(uid types.UID) types.UID
}

// MirrorPodReader pairs static pods with their mirror pods, by full name.
// Implementations must be safe for concurrent use. Returned pods must not be
// modified; returned slices belong to the caller.
type MirrorPodReader interface {
	// GetMirrorPodByPod returns the mirror pod of the static pod pod.
	GetMirrorPodByPod(pod *v1.Pod) (*v1.Pod, bool)
	// GetPodAndMirrorPod completes a pair: given a mirror pod it returns
	// its static pod (or nil), the mirror pod, and wasMirror true; given
	// any other pod it returns that pod, its mirror pod (or nil), and
	// false.
	GetPodAndMirrorPod(pod *v1.Pod) (p, mirrorPod *v1.Pod, wasMirror bool)
	// GetPodsAndMirrorPods returns, from one consistent state, the
	// non-mirror pods, the mirror pods, and the full names of the mirror
	// pods that have no static pod (orphans), each in no particular order.
	GetPodsAndMirrorPods() (pods, mirrorPods []*v1.Pod, orphanedMirrorPodFullNames []string)
}

// PodWriter records changes to the desired pods, mirror pods included.
// Implementations must be safe for concurrent use and must not modify the
// pods they are given.
type PodWriter interface {
	// AddPod records a new pod; the same as UpdatePod.
	AddPod(pod *v1.Pod)
	// UpdatePod records pod, replacing the pod with its UID if any.
	UpdatePod(pod *v1.Pod)
	// RemovePod forgets the pod with pod's UID, if any.
	RemovePod(pod *v1.Pod)
}

// DesiredPodStore is what the rest of podkit (lifecycle, housekeeping) needs
// from a store of desired pods. Manager implements it; an agent may supply its
// own, for instance one fed by an informer, as long as it keeps the rules
// documented on Manager's methods: pairing and translation by full name with
// static pods only, and removal by UID.
type DesiredPodStore interface {
	PodReader
	MirrorPodReader
	PodWriter
}

var _ DesiredPodStore = (*Manager)(nil)
