// Package nodestatus keeps the node's Node object: Register creates it (or
// reuses the one of that name), Registration does so and registers it
// again when it is deleted while the agent runs, Heartbeat keeps its Ready
// condition and Lease fresh, with the kubelet's reasons, and
// PublishKubeletEndpoint puts the kubelet API's address and port (package
// kubeletserver) in its status, for kubectl logs and the node proxy.
//
// # Usage
//
//  1. Register the Node before the agent runs its pods
//     (Registration.Register), and run Registration.Run as one of the
//     agent's loops, with an OnRegistered that writes the pods' statuses
//     again.
//  2. Run a Heartbeat as one of the agent's loops, with Health saying when
//     the node cannot run pods (a shutdown), an events recorder for
//     NodeReady and NodeNotReady, and OnNodeMissing set to
//     Registration.NodeMissing.
//  3. Once the kubelet API listens, PublishKubeletEndpoint.
//
// # Concurrency
//
// The functions are safe for concurrent use; a Heartbeat beats from one
// goroutine at a time (its Run), a Registration runs one Run.
//
// # Where it differs from the kubelet
//
// A kubelet whose Node is deleted keeps failing its status updates until
// it is restarted; a Registration creates the Node again at once, as
// virtual-kubelet's node controller does. The pods bound to the node stay
// (the pod garbage collector waits about 40 seconds for a missing Node);
// the mirror pods, owned by the deleted Node, are deleted by the garbage
// collector and created again by the agent's housekeeping.
package nodestatus
