// Package lifecycle is a node agent's sync loop: the Handler takes config
// updates, keeps the desired pods, admits new ones, drives the pod workers,
// runs housekeeping, and shuts the node's pods down. Its two neighbours
// are packages of their own, which it imports and which import nothing of
// it:
//
//   - lifecycle/podconfig: where desired pods come from. Config sources (a
//     ManifestSource, an API server source of yours) send full snapshots to
//     a podconfig.Config, which turns them into podconfig.PodUpdates.
//   - lifecycle/admission: whether a new pod may run. The Handler asks an
//     admission.Chain of the admission.Handlers it is given.
//
// Data flows one way:
//
//	sources --SetPods--> podconfig.Config --PodUpdate--> Handler.Run --UpdatePod--> podworker.PodWorkers --> your PodSyncer
//	                                                      |   ^
//	                                       desired pods   v   |  the window, SyncKnownPods
//	                                               PodStore (podmanager.Manager)
//
// The Handler talks to the pod workers and the store through interfaces it
// declares, no wider than what it calls: Workers (WorkerRunner, PodUpdater,
// PodWindow, PodSnapshotter) and PodStore (PodStoreReader,
// PodStoreWriter). *podworker.PodWorkers[T] and *podmanager.Manager
// implement them.
//
// # Where each job lives
//
//	handler.go       Handler, Options, NewHandler, SourcesReady
//	run.go           Run: the loop, and the workers' lifetime
//	dispatch.go      Dispatch and the HandlePod* methods, one skeleton (apply)
//	admit.go         admission of one pod, and what a rejection does
//	rejected.go      the set of pods admission rejected
//	active.go        GetActivePods: the pods whose resources are in use
//	readiness.go     when a status-only change needs a sync (readiness gates)
//	housekeeping.go  Housekeeping: closing the loop with the workers and runtime
//	mirrorpods.go    housekeeping's mirror pod steps
//	shutdown.go      ShutdownNode, and critical.go: which pods go last
//	workers.go       the Workers interfaces, and sending updates to them
//	store.go         the PodStore interfaces
//	recorder.go      Recorder and the event reasons of this package
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
//		OnReject:      writeStatus,
//	})
//	manifests, _ := podconfig.NewManifestSource("/etc/kubernetes/manifests", podconfig.ManifestOptions{NodeName: node})
//	go manifests.Run(ctx, cfg)
//	go apiSource(ctx, cfg) // cfg.SetPods(ctx, mirror.ApiserverSource, podsBoundToThisNode)
//	go onSignal(func() { h.ShutdownNode(shutdownCtx, lifecycle.ShutdownOptions{GracePeriod: 30 * time.Second}) })
//	err := h.Run(ctx, cfg.Updates()) // runs the workers; returns after ctx ends and they drained
//
// The embedder's duties:
//
//  1. Create one PodStore (a podmanager.Manager) and one
//     podworker.PodWorkers and give both to NewHandler; send every config
//     change through the Handler (Run, Dispatch or the HandlePod* methods),
//     never to the store or the workers directly, so both stay in step.
//  2. Let Handler.Run run the workers: it starts them, and stops and drains
//     them when its ctx ends (one ctx, one return, nothing left running).
//     Do not run them yourself as well; Run reports that at once. Only an
//     agent that drives Dispatch and Housekeeping from a loop of its own,
//     instead of Run, runs the workers itself.
//  3. Feed every config source into one podconfig.Config with full
//     snapshots (SetPods), each under its own source name:
//     mirror.ApiserverSource for the API server (the only source that may
//     send mirror pods), mirror.FileSource for manifests. List in
//     Options.Sources every source whose absence must not be read as "no
//     pods", so nothing is killed before it has spoken.
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
//	OpAdd ---> store.AddPod ---> admission --rejected--> event + OnReject (never reaches the workers)
//	                                |
//	                             admitted ---> UpdatePod(create) ---> SyncPod ...
//	OpUpdate / OpDelete ---> store.UpdatePod ---> UpdatePod(update)   (a deletion carries its grace period)
//	OpRemove ---> store.RemovePod ---> UpdatePod(kill)                (once the sources are ready)
//	housekeeping ---> SyncKnownPods: finished and undesired workers are forgotten,
//	                  live undesired ones terminated; unknown active pods re-created;
//	                  orphaned mirrors deleted once their static pod is terminated;
//	                  unknown runtime pods killed
//
// Mirror pods never get a worker: an added, updated or removed mirror pod is
// an update of its static pod. A nil pod or a pod without a UID, given to
// Dispatch or to any HandlePod* method, is dropped by one rule: an error
// log line and, unless it is nil, a podconfig.ReasonFailedValidation event.
//
// # Concurrency
//
// The Handler's Dispatch, HandlePod* and Housekeeping methods are
// serialized with each other: they are the sync loop's critical section,
// and Run calls them from its goroutine. The callbacks they make (admission
// handlers, OnReject, the RuntimePodLister, the MirrorPodClient, the
// Recorder) run inside that section and must not call them back; they may
// call GetActivePods and SourcesReady. ShutdownNode runs on its caller's
// goroutine, concurrently with Run. No lock of this package is held while
// the pod workers run hooks.
//
// # Where podkit differs from the kubelet
//
//   - Sources cannot lie: the config source annotation is stamped from the
//     source a pod came through (by podconfig.Config and again by
//     Dispatch), so an API pod carrying "kubernetes.io/config.source: file"
//     is still an API pod, and a mirror pod can only come from the API
//     server source.
//   - There is no status manager: a pod admission rejects is remembered by
//     the Handler (it is not active, and its later updates are not sent to
//     the workers) and its status is handed to Options.OnReject.
//   - Housekeeping keeps mirror pods in step (the kubelet does it in its
//     SyncPod), and when listing the runtime fails it still does every step
//     that does not need the list.
//   - Handler.Run owns the pod workers' lifetime; the kubelet starts its
//     pod workers lazily, one goroutine per pod, from its sync loop.
package lifecycle
