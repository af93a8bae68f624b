// Package podconfig is where a node agent's desired pods come from: the
// config sources, and the merge of their snapshots into a stream of
// PodUpdates for the sync loop (lifecycle.Handler).
//
//	ManifestSource ───┐
//	your API source ──┼── SetPods(source, snapshot) ──> Config ── Updates() ──> lifecycle.Handler.Run
//	any other source ─┘        (a PodSink)                     (PodUpdates)
//
// A source knows only full snapshots: "source S now has exactly these
// pods". Config remembers what each source last had and turns every new
// snapshot into the operations that lead there (OpAdd, OpUpdate, OpDelete,
// OpReconcile, OpRemove). Nothing here imports the sync loop: the data flows
// one way, from the sources to lifecycle.
//
// # Usage
//
//  1. Create one Config with New and hand its Updates channel to
//     lifecycle.Handler.Run (or pass the results of Merge to
//     lifecycle.Handler.Dispatch from your own loop).
//  2. Give each source its own name and have it send full snapshots to the
//     Config's SetPods (a PodSink): mirror.ApiserverSource for the API
//     server (the only source that may send mirror pods), mirror.FileSource
//     for manifests, your own names for the rest.
//  3. For a directory of static pod manifests, create a ManifestSource
//     with NewManifestSource and run its Run(ctx, config) on a goroutine of
//     its own.
//
// # Concurrency
//
// Config and ManifestSource methods are safe for concurrent use. SetPods
// blocks while the Updates channel is full, so the sync loop must keep
// reading it. The Recorder is called on the goroutine of the call that
// found the problem.
//
// # Where podkit differs from the kubelet
//
//   - Sources cannot lie: Config stamps the kubernetes.io/config.source
//     annotation with the name the snapshot came under, whatever the pod
//     carried, and drops a mirror pod from any source but the API server.
//   - Config drops, with a ReasonFailedValidation event, pods without a UID
//     and pods repeating the full name or UID of an earlier pod of the same
//     snapshot.
//   - A ManifestSource reads only *.yaml, *.yml and *.json files, decodes
//     them strictly, and applies no API defaulting beyond the termination
//     grace period.
package podconfig
