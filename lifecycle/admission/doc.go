// Package admission decides whether a pod new to the node may run on it.
//
// lifecycle.SyncLoop asks, for each pod added from config (and each pod its
// housekeeping re-adds), the Handlers it was given (in order, as a Chain:
// the first rejection wins) with the pod and the node's other active pods. A rejected pod never reaches the pod
// workers; the Result's reason and message become its event and status.
//
// The package ships the kubelet's two resource checks: ResourceFitHandler
// (CPU and memory requests against the node's allocatable, computed by
// PodRequests the way the kubelet and the scheduler do, sidecars included)
// and MaxPodsHandler (the max-pods setting). Anything else an agent needs
// (node selectors, taints, its own capacity) is a Handler, or a
// HandlerFunc, of its own.
//
// # Concurrency
//
// ResourceFitHandler, MaxPodsHandler and Chain are safe for concurrent
// use. lifecycle.SyncLoop calls Admit from its goroutine, one pod at a
// time; see Handler for what a handler may and may not call.
package admission
