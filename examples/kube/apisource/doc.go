// Package apisource is the config source of a node's API server pods: an
// informer over the pods bound to the node (a spec.nodeName field
// selector, the only list a node identity may make) whose full snapshots go
// to a podconfig.PodSink under mirror.ApiserverSource ("api"). Give a
// Source to lifecycle.Agent.AddSource.
//
// # Usage
//
//  1. Create a Source with New over clientset.CoreV1() and the node name.
//  2. Add it to the agent (lifecycle.Agent.AddSource), which runs it; it
//     is ready, for the sync loop, once the informer has synced.
//
// # Concurrency
//
// New starts nothing; Run blocks until ctx ends and returns only after the
// informer stopped.
package apisource
