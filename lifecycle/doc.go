// Package lifecycle turns podkit's primitives into a node agent's main
// loop: config sources and the merge of their snapshots (package
// podconfig), admission (package admission), the dispatcher that drives
// the pod workers (Handler and its HandlePod* methods), housekeeping, the
// sync loop (Handler.Run) and graceful node shutdown (Handler.ShutdownNode).
// An agent can adopt it whole or take it apart: every piece is a plain type
// or method, and the Handler talks to the pod workers and the desired pod
// store through small interfaces it declares (Workers: PodUpdater,
// PodWindow, PodSnapshotter; PodStore: PodStoreReader, PodStoreWriter).
//
// Data flows one way:
//
//	sources --SetPods--> Config --PodUpdate--> Handler.Run --UpdatePod--> podworker.PodWorkers --> your PodSyncer
//	                                              |   ^
//	                               desired pods   v   |  the window, SyncKnownPods
//	                                        PodStore (podmanager.Manager)
//
// # Usage
//
//	store := podmanager.New()
//	workers, _ := podworker.New[Status](syncer, podworker.Options[Status]{...})
//	cfg, _ := podconfig.New(podconfig.Options{Recorder: rec})
//	h, _ := lifecycle.NewHandler(workers, store, lifecycle.Options{
//		AdmitHandlers: []admission.Handler{fit, maxPods},
//		MirrorClient:  mirrorClient,            // nil without an API server
//		RuntimePods:   runtimeLister,           // nil if the runtime cannot list pods
//		Sources:       []string{mirror.FileSource, mirror.ApiserverSource},
//		RunWorkers:    workers.Run,             // Run starts and drains the workers
//		OnReject:      writeStatus,
//	})
//	manifests, _ := podconfig.NewManifestSource("/etc/kubernetes/manifests", podconfig.ManifestOptions{NodeName: node})
//	go manifests.Run(ctx, cfg)
//	go apiSource(ctx, cfg) // cfg.SetPods(ctx, mirror.ApiserverSource, podsBoundToThisNode)
//	go onSignal(func() { h.ShutdownNode(shutdownCtx, lifecycle.ShutdownOptions{GracePeriod: 30 * time.Second}) })
//	err := h.Run(ctx, cfg.Updates()) // returns after ctx ends and the workers drained
//
// The embedder's duties:
//
//  1. Create one PodStore (podmanager.Manager) and one podworker.PodWorkers and
//     give both to NewHandler; send every config change through the Handler
//     (Run, Dispatch or the HandlePod* methods), never to the store or the
//     workers directly, so both stay in step.
//  2. Start the workers exactly once: either set Options.RunWorkers to their
//     Run and let Handler.Run own them (recommended: one ctx, one return,
//     nothing left running), or run them yourself alongside Run.
//  3. Feed every config source into one Config with full snapshots
//     (SetPods), each under its own source name: mirror.ApiserverSource for
//     the API server (the only source that may send mirror pods),
//     mirror.FileSource for manifests. List in Options.Sources every
//     source whose absence must not be read as "no pods", so nothing is
//     killed before it has spoken.
//  4. Write the status Options.OnReject hands you (an API-server agent
//     writes it to the pod), and apply the PodStatusFunc that
//     SyncTerminatingPod receives to the final status.
//  5. Give a RuntimePodLister if your runtime can list its pods, so
//     leftovers of a previous run are killed, and implement
//     podworker.RuntimePodSyncer so they can be.
//  6. Give a mirror.MirrorPodClient when there is an API server, so static
//     pods show up there; feed the mirror pods back through the API source.
//  7. Call ShutdownNode when the node is about to go down, then end Run's
//     ctx.
//
// # Lifecycle of a pod through the Handler
//
//	ADD ---> store.AddPod ---> admission --rejected--> event + OnReject (never reaches the workers)
//	                              |
//	                           admitted ---> UpdatePod(create) ---> SyncPod ...
//	UPDATE / DELETE ---> store.UpdatePod ---> UpdatePod(update)   (a deletion carries its grace period)
//	REMOVE ---> store.RemovePod ---> UpdatePod(kill)              (once the sources are ready)
//	housekeeping ---> SyncKnownPods: finished and undesired workers are forgotten,
//	                  live undesired ones terminated; unknown active pods re-created;
//	                  orphaned mirrors deleted once their static pod is terminated;
//	                  unknown runtime pods killed
//
// Mirror pods never get a worker: an added, updated or removed mirror pod is
// an update of its static pod.
//
// # Concurrency
//
// Config and ManifestSource methods are safe for concurrent use. The
// Handler's Dispatch, HandlePod* and Housekeeping methods are serialized
// with each other: they are the sync loop's critical section, and Run calls
// them from its goroutine. The callbacks they make (admission handlers,
// OnReject, the RuntimePodLister, the MirrorPodClient, the Recorder) run
// inside that section and must not call them back; they may call
// GetActivePods and SourcesReady. ShutdownNode runs on its caller's
// goroutine, concurrently with Run. No lock of this package is held while
// the pod workers run hooks.
//
// # Where podkit differs from the kubelet
//
//   - Sources cannot lie: the config source annotation is stamped from the
//     source a pod came through (by Config and again by Dispatch), so an
//     API pod carrying "kubernetes.io/config.source: file" is still an API
//     pod, and a mirror pod can only come from the API server source.
//   - There is no status manager: a pod admission rejects is remembered by
//     the Handler (it is not active, and its later updates are not sent to
//     the workers) and its status is handed to Options.OnReject.
//   - Housekeeping keeps mirror pods in step (the kubelet does it in its
//     SyncPod), and when listing the runtime fails it still does every step
//     that does not need the list.
//   - A ManifestSource reads only *.yaml, *.yml and *.json files, decodes
//     them strictly, and applies no API defaulting.
package lifecycle
