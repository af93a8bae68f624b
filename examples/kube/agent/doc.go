// Package agent is podkit-agent: a node agent that registers a Node in a
// real Kubernetes cluster and runs the pods bound to it as local processes
// (package processruntime), or, with Config.Runtime RuntimeHollow, as no
// processes at all (package hollowruntime: the hollow node of scalability
// tests, whose pods still go through every part below).
//
// It is one lifecycle.Agent whose parts come from the packages of
// examples/kube:
//
//	API server ── apisource.Source ─┐ (sources)
//	manifest dir ─ ManifestSource ──┴─> lifecycle.Agent: config, sync loop ─> podworker.PodWorkers
//	                                              │ housekeeping                 │ hooks
//	                               mirror.Client ─┘ (mirror pods)                └─> statuswriter.WrapSyncer ─> processruntime.Runtime
//	                                                                                   │ statuses
//	API server <── statuswriter.Writer (status subresource, final deletes) <────────────┘
//
// and, as the agent's loops, a nodestatus.Heartbeat that keeps the Node
// Ready, an events.Recorder that records the kubelet's events (the
// runtime's container events, admission rejections, the Node's), the
// status writer and the kubelet API. New builds it all; Run registers the
// Node and runs it. ShutdownNode and
// EvictPod stop pods as the kubelet's shutdown and eviction managers do.
// The process runtime's processes outlive the agent: a new Agent on the
// same state directory adopts them, so an agent restart neither restarts running pods nor
// re-runs finished ones.
package agent
