// Package agent is podkit-agent: a node agent that registers a Node in a
// real Kubernetes cluster and runs the pods bound to it as local processes.
//
// It wires podkit's pieces to the API server through package kube:
//
//	API server ── kube.APISource ──┐
//	manifest dir ─ ManifestSource ─┴─> podconfig.Config ─> lifecycle.Handler ─> podworker.PodWorkers
//	                                                          │ housekeeping        │ hooks
//	                                           mirror.Client ─┘ (mirror pods)       └─> kube.WrapSyncer ─> processruntime.Runtime
//	                                                                                        │ statuses
//	API server <── kube.StatusWriter (status subresource, final deletes) <──────────────────┘
//
// plus a kube.NodeHeartbeat that keeps the Node Ready, and a
// kube.EventRecorder that records the kubelet's events: the runtime's
// container events, admission rejections, the Node's. ShutdownNode and
// EvictPod stop pods as the kubelet's shutdown and eviction managers do.
// The processes outlive the agent: a new Agent on the same state directory
// adopts them, so an agent restart neither restarts running pods nor
// re-runs finished ones.
package agent
