// Package nodestatus keeps the node's Node object: Register creates it (or
// reuses the one of that name), Heartbeat keeps its Ready condition and
// Lease fresh, with the kubelet's reasons, and PublishKubeletEndpoint puts
// the kubelet API's address and port (package kubeletserver) in its
// status, for kubectl logs and the node proxy.
//
// # Usage
//
//  1. Register the Node before the agent runs its pods.
//  2. Run a Heartbeat as one of the agent's loops, with Health saying when
//     the node cannot run pods (a shutdown) and an events recorder for
//     NodeReady and NodeNotReady.
//  3. Once the kubelet API listens, PublishKubeletEndpoint.
//
// # Concurrency
//
// The functions are safe for concurrent use; a Heartbeat beats from one
// goroutine at a time (its Run).
package nodestatus
