package probe

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// PodTermination is what the manager asks the pod workers about a pod,
// by UID, before each probe and on each UpdatePodStatus: the manager has
// no idea of its own of whether a pod runs. *podworker.PodWorkers
// implements it; the methods must be safe for concurrent use and must not
// block.
type PodTermination interface {
	// CouldHaveRunningContainers: false once the pod's containers are
	// known stopped, or for a pod the engine does not know once it has
	// synced. The manager then drops every probe of the pod.
	CouldHaveRunningContainers(uid types.UID) bool
	// IsPodTerminationRequested: true once the pod is to stop. Liveness
	// and startup probes then stop (no restart can come of them);
	// readiness probes go on until the containers have stopped, so a
	// container that stops serving during its grace period turns not
	// ready, as on a kubelet.
	IsPodTerminationRequested(uid types.UID) bool
}

var _ PodTermination = (*podworker.PodWorkers[struct{}])(nil)
