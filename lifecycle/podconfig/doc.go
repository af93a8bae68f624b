// Package podconfig is where a node agent's desired pods come from: the
// config sources, and the merge of their snapshots into a stream of
// PodUpdates for the sync loop (lifecycle.SyncLoop).
//
//	ManifestSource ───┐
//	your API source ──┼── SetPods(source, snapshot) ──> Config ── Updates() ──> lifecycle.SyncLoop.Run
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
//  1. A lifecycle.Agent makes the one Config of an agent and hands its
//     Updates to its sync loop (without an Agent: create one with New and
//     hand its Updates channel to lifecycle.SyncLoop.Run, or pass the
//     results of Merge to lifecycle.SyncLoop.Dispatch from your own loop).
//  2. Give each source its own name and make it a Source (a name and a Run
//     that sends full snapshots to a PodSink; NewSource adapts a function):
//     mirror.ApiserverSource for the API server (the only source that may
//     send mirror pods), mirror.FileSource for manifests, your own names
//     for the rest. lifecycle.Agent.AddSource runs it.
//  3. For a directory of static pod manifests, create a ManifestSource
//     with NewManifestSource: it is a Source.
//
// # Concurrency
//
// Config and ManifestSource methods are safe for concurrent use. SetPods
// blocks while the Updates channel is full, so the sync loop must keep
// reading it. The event.Recorder of the options is called on the goroutine
// of the call that found the problem.
//
// # Where podkit differs from the kubelet
//
//   - Sources cannot lie: Config stamps the kubernetes.io/config.source
//     annotation with the name the snapshot came under, whatever the pod
//     carried, and drops a mirror pod from any source but the API server.
//   - Config drops, with a ReasonFailedValidation event, pods without a UID
//     and pods repeating the full name or UID of an earlier pod of the same
//     snapshot; its updates say they passed these rules
//     (PodUpdate.FromConfig), so the sync loop does not apply them again.
//   - A ManifestSource reads only *.yaml, *.yml and *.json files, decodes
//     them strictly, and applies no API defaulting beyond the termination
//     grace period.
//   - A ManifestSource bounds what one file can cost: at most
//     ManifestOptions.MaxFileSize bytes (1.5 MiB by default), read within
//     ManifestOptions.ReadTimeout (5 s); named pipes, devices and files of
//     /proc or /sys are reported, never read. A file of several YAML
//     documents gives its first, with a ReasonMultipleDocuments warning
//     (the kubelet drops the others silently).
//   - Static pods are validated as the kubelet does before admission
//     (mirror.PrepareStaticPod calls mirror.ValidatePodObject); an invalid
//     one is reported with ReasonInvalidManifest.
package podconfig
