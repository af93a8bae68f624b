// Package kube connects podkit to a real Kubernetes API server through
// client-go. It lives in a module of its own so client-go and the test
// server never enter podkit's root module.
//
// It holds the pieces a node agent needs to take part in a cluster:
//
//   - PodAPI adapts a clientset to mirror.PodAPI, and NodeUID looks up the
//     Node's UID, so mirror.NewClient creates and deletes real mirror pods
//     (with the Node as controller owner, deletes bound to a UID).
//   - APISource is the config source of the pods bound to the node: an
//     informer with a spec.nodeName field selector whose full snapshots go
//     to a podconfig.Config, which makes them podconfig.PodUpdates of the
//     "api" source.
//   - StatusWriter, with WrapSyncer, is a plain status manager: after each
//     sync the pod's derived v1.PodStatus is patched onto its status
//     subresource when it changed (a static pod's onto its mirror pod); a
//     terminal phase waits until the pod's containers are known stopped;
//     a refused write is tried again until it lands or the pod is gone; a
//     deleted pod is removed, with grace 0 and a UID precondition, once it
//     is finished and its terminal status is stored.
//   - EventRecorder records the kubelet's events (reasons and messages in
//     eventreasons.go) through client-go's broadcaster: aggregated,
//     rate-limited, never blocking; a failing API server loses events,
//     not pods. EvictionStatus is the final status of a pod the node
//     evicts.
//   - RegisterNode and NodeHeartbeat register the Node and keep it Ready;
//     PublishKubeletEndpoint tells the API server where the node serves
//     the kubelet API (package kubeletserver), for kubectl logs and the
//     node proxy.
//
// Package agent wires them to lifecycle, podworker and the process runtime
// of examples/nodeagent, with the kubelet API and the metrics of package
// nodemetrics; cmd/podkit-agent is the runnable agent. Package clustertest
// runs a whole cluster of such nodes in one process; cmd/podkit-cluster is
// that cluster as a command.
//
// # Usage
//
// An agent with a clientset cs for node name:
//
//  1. Register the Node: RegisterNode(ctx, cs.CoreV1(), node).
//  2. Create a StatusWriter, wrap the runtime's PodSyncer with WrapSyncer,
//     and build the pod workers over the wrapped syncer.
//  3. Give lifecycle.NewHandler a mirror.NewClient(NewPodAPI(cs.CoreV1()),
//     mirror.ClientOptions{NodeName: name, NodeUID: NodeUID(cs.CoreV1(),
//     name)}), list mirror.ApiserverSource in its Sources, let OnReject
//     call StatusWriter.SetPodStatus, and give it (and the config sources)
//     an EventRecorder as their Recorder; record the runtime's container
//     events on it (ContainerRef).
//  4. Run, each on its own goroutine: the Handler, StatusWriter.Run with the
//     pod workers, APISource.Run into a podconfig.Config, EventRecorder.Run,
//     and optionally a NodeHeartbeat (given the recorder, it records
//     NodeReady and NodeNotReady).
//
// # Node identity
//
// Everything here works with a node's own credentials (user
// system:node:<name> in group system:nodes) under
// --authorization-mode=Node,RBAC and the NodeRestriction admission plugin:
// it lists and watches pods only with the spec.nodeName selector, creates
// only mirror pods owned by its Node, and writes only the status of, and
// deletes only, pods bound to its node. The tests run it so.
//
// # Concurrency
//
// All types are safe for concurrent use. Constructors start nothing; each
// Run blocks until its context ends and returns only after the goroutines it
// started have returned.
package kube
