// Package nodeshutdown stops a node's pods when the node goes down, as the
// kubelet's node shutdown manager does: every pod the pod workers have is
// killed, the pods that are not critical first and the critical ones
// (IsCritical) last, each group within its share of a budget, and each
// pod's final status says why it stopped (phase Failed unless it
// succeeded, reason Terminated, a DisruptionTarget condition).
//
// A Manager is a room of its own: it talks to the rest of the agent only
// through the pod workers (it reads their snapshots and hands them kills)
// and through admission (it is an admission.Handler that refuses every pod
// once the shutdown started, so the sync loop starts nothing new and
// housekeeping re-adds nothing). lifecycle.Agent builds one and puts it
// first among the sync loop's admission handlers; Agent.NodeShutdown
// returns it.
//
// # Usage
//
//  1. Take the Manager of your lifecycle.Agent (Agent.NodeShutdown), or,
//     for a sync loop of your own, build one with New over the pod workers
//     and put it first in lifecycle.SyncLoopOptions.AdmitHandlers.
//  2. When the node is about to go down, call Shutdown with the budget,
//     while the sync loop still runs; then stop the agent.
//
// # Concurrency
//
// Manager's methods are safe for concurrent use. Admit is called from the
// sync loop and never blocks; Shutdown blocks its caller until the pods
// are stopped, the budget is spent or its ctx ends.
//
// # Where podkit differs from the kubelet
//
//   - A static pod is not critical merely for being static: the groups go
//     by priority only, as the kubelet's shutdown manager groups them.
//   - Shutdown is called by the agent (a signal, a command); podkit does
//     not watch systemd's inhibitor locks.
//   - The budget has two groups, not the kubelet's list of priority
//     classes and grace periods.
package nodeshutdown
