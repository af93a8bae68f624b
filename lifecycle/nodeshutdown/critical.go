package nodeshutdown

import v1 "k8s.io/api/core/v1"

// The priority classes and the priority from which a pod is critical: it
// is stopped last when the node shuts down.
const (
	// SystemNodeCritical is the priority class of pods the node cannot
	// work without.
	SystemNodeCritical = "system-node-critical"
	// SystemClusterCritical is the priority class of pods the cluster
	// cannot work without.
	SystemClusterCritical = "system-cluster-critical"
	// SystemCriticalPriority is the lowest priority of a critical pod, the
	// priority of system-cluster-critical.
	SystemCriticalPriority int32 = 2000000000
)

// IsCritical reports whether pod is critical for node shutdown: its
// priority class is system-node-critical or system-cluster-critical, or its
// priority is at least SystemCriticalPriority. Unlike the kubelet's general
// notion of a critical pod, a static pod is not critical merely for being
// static, as in the kubelet's node shutdown manager, which groups by
// priority only. A nil pod is not critical.
func IsCritical(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	switch pod.Spec.PriorityClassName {
	case SystemNodeCritical, SystemClusterCritical:
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}
