// Package statuswriter is a plain status manager for an agent connected to
// an API server: after each sync the pod's derived v1.PodStatus is patched
// onto its status subresource when it changed (a static pod's onto its
// mirror pod); a terminal phase waits until the pod's containers are known
// stopped; a refused write is tried again until it lands or the pod is
// gone; a deleted pod is removed, with grace 0 and a UID precondition, once
// it is finished and its terminal status is stored.
//
// Writer keeps the statuses and writes them; WrapSyncer decorates the
// runtime's syncer so that each hook reports the status it left. The rules
// of what is written (rules.go) are kept apart from the API calls (sync.go).
//
// # Usage
//
//  1. Create a Writer with New over clientset.CoreV1().
//  2. Wrap the runtime's PodSyncer with WrapSyncer(syncer, writer,
//     derive), and build the pod workers (lifecycle.NewAgent) over it.
//  3. Let the sync loop's OnReject call Writer.SetPodStatus.
//  4. Run Writer.Run with the pod workers as one of the agent's loops.
//
// # Concurrency
//
// Writer's methods are safe for concurrent use. New starts nothing; Run
// blocks until ctx ends and returns only after its goroutines returned.
// Run writes up to Options.Parallel pods at once, each pod's writes one
// after the other; statuses recorded while a pod's write waits coalesce
// into one write of the newest, and a status already written is not
// read or written again until the pod's resync. A write is one request, a
// patch preconditioned on the resourceVersion of the writer's last copy
// of the pod (the answer to its previous patch, else the pod workers'
// copy); only a refused one (the pod changed since) reads the pod first.
package statuswriter
