// Package kube connects podkit to a real Kubernetes API server through
// client-go. It lives in a module of its own so client-go and the test
// server never enter podkit's root module.
//
// Its packages hold the pieces a node agent needs to take part in a
// cluster, one job each:
//
//   - mirrorpods: a clientset as mirror.PodAPI, and the Node's UID, so
//     mirror.NewClient creates and deletes real mirror pods (with the Node
//     as controller owner, deletes bound to a UID).
//   - apisource: the config source of the pods bound to the node, an
//     informer with a spec.nodeName field selector whose full snapshots go
//     to the agent's podconfig.Config under the "api" source.
//   - statuswriter: a plain status manager (Writer, and WrapSyncer around
//     the runtime's syncer): statuses patched after each sync, a terminal
//     phase withheld while containers may run, refused writes retried,
//     finished deleted pods removed.
//   - events: the kubelet's events (reasons and messages) through
//     client-go's broadcaster: aggregated, rate-limited, never blocking.
//   - nodestatus: the Node's registration, heartbeat (Ready condition and
//     Lease) and kubelet endpoint.
//   - eviction: the final status of a pod the node evicts.
//   - kubeletserver: the kubelet API (logs, exec, attach, port-forward,
//     stats, metrics); nodemetrics: the kubelet's metrics from podkit's.
//
// Package agent wires them to a lifecycle.Agent over the process runtime
// of examples/nodeagent; cmd/podkit-agent is the runnable agent. Package
// clustertest runs a whole cluster of such nodes in one process;
// cmd/podkit-cluster is that cluster as a command. This package itself
// holds only the module's tests against a real API server.
//
// # Usage
//
// An agent with a clientset cs for node name (package agent does exactly
// this):
//
//  1. Register the Node: nodestatus.Register(ctx, cs.CoreV1(), node).
//  2. Create a statuswriter.Writer and an events.Recorder, wrap the
//     runtime's PodSyncer with statuswriter.WrapSyncer, and build a
//     lifecycle.Agent over it, with a mirror.Client over mirrorpods as its
//     MirrorClient, OnReject calling Writer.SetPodStatus, and the recorder
//     as its Recorder.
//  3. Add an apisource.Source (and a manifest source) to the agent, and
//     the recorder, Writer.Run, a nodestatus.Heartbeat and the kubelet
//     API as its loops; run it.
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
// All types are safe for concurrent use. Constructors start nothing but
// what they say (events.New starts the broadcaster's queue; agent.New
// opens the process runtime, which watches the processes it adopts, until
// Run or Close releases it); each Run blocks until its context ends and
// returns only after the goroutines it started have returned.
package kube
