// Package lifecycle is a node agent's pod lifecycle around the pod workers:
// the sync loop (SyncLoop) takes config updates, keeps the desired pods,
// admits new ones, drives the pod workers and runs housekeeping; the Agent
// assembles it once, with the pod workers, the desired pod store, the
// config sources, node shutdown and the agent's other loops, and runs and
// stops the whole. Its neighbours are packages of their own, which it
// imports and which import nothing of it:
//
//   - lifecycle/podconfig: where desired pods come from. Config sources (a
//     ManifestSource, an API server source of yours) send full snapshots to
//     a podconfig.Config, which turns them into podconfig.PodUpdates.
//   - lifecycle/admission: whether a new pod may run. The SyncLoop asks an
//     admission.Chain of the admission.Handlers it is given.
//   - lifecycle/nodeshutdown: stopping the node's pods when the node goes
//     down. It talks to the sync loop only through admission (it refuses
//     pods once shutting down) and the pod workers (kills, snapshots).
//   - lifecycle/event: the one shape of an event recorder.
//
// Data flows one way:
//
//	sources --SetPods--> podconfig.Config --PodUpdate--> SyncLoop.Run --UpdatePod--> podworker.PodWorkers --> your PodSyncer
//	                                                      |   ^                        ^  window, RequestSync
//	                                       desired pods   v   |  the window,           |
//	                                          podmanager.Manager  SyncKnownPods      per-pod loops, runnables
//
// The SyncLoop talks to the pod workers and the store through interfaces it
// declares, no wider than what it calls: Workers (WorkerRunner, PodUpdater,
// PodWindow, PodSnapshotter) and PodStore (PodStoreReader,
// PodStoreWriter). *podworker.PodWorkers[T] and *podmanager.Manager
// implement them.
//
// # Where each job lives
//
//	agent.go         Agent, AgentOptions, NewAgent, AddSource, Add, RequestSync, the accessors
//	features.go      PodFeatureOptions, PodFeatures: the per-pod loops, built and run once
//	agent_run.go     Agent.Run: start, supervise, stop in order
//	runnable.go      Runnable, PodObserver, PodLoop: the agent's other loops, per-pod loops among them
//	syncloop.go      SyncLoop, SyncLoopOptions, NewSyncLoop, SourcesReady
//	run.go           SyncLoop.Run: the loop, and the workers' lifetime
//	dispatch.go      Dispatch and the HandlePod* methods, one skeleton (apply)
//	admit.go         admission of one pod, and what a rejection does
//	rejected.go      the set of pods admission rejected
//	active.go        GetActivePods: the pods whose resources are in use
//	readiness.go     when a status-only change needs a sync (readiness gates)
//	housekeeping.go  Housekeeping, and KillRuntimeOrphans: closing the loop with the workers and runtime
//	mirrorpods.go    housekeeping's mirror pod steps
//	workers.go       the Workers interfaces, and sending updates to them
//	store.go         the PodStore interfaces
//	reasons.go       the event reasons of this package
//
// # Usage
//
//	agent, err := lifecycle.NewAgent(syncer, lifecycle.AgentOptions[Status]{
//		Workers: podworker.Options[Status]{Status: statusSource},
//		SyncLoop: lifecycle.SyncLoopOptions{
//			AdmitHandlers: []admission.Handler{fit, maxPods},
//			MirrorClient:  mirrorClient, // nil without an API server
//			RuntimePods:   runtimeLister, // nil if the runtime cannot list pods
//			OnReject:      writeStatus,
//		},
//		Recorder: recorder,
//		Logger:   log,
//	})
//	manifests, _ := podconfig.NewManifestSource("/etc/kubernetes/manifests", podconfig.ManifestOptions{NodeName: node})
//	agent.AddSource(manifests)
//	agent.AddSource(apiSource)                 // sends under mirror.ApiserverSource
//	agent.Add("status writer", statusWriter)   // and events, heartbeat, probes, ...
//	runtime.OnContainerExit(agent.RequestSync) // runtime events, by UID
//	go onSignal(func() { agent.NodeShutdown().Shutdown(ctx, nodeshutdown.Budget{GracePeriod: 30 * time.Second}) })
//	err = agent.Run(ctx) // returns after ctx ends and everything drained
//
// The embedder's duties (NewAgent and Run do the wiring the kubelet's
// main does: one store, one set of pod workers, one config merge, one sync
// loop that runs the workers, every source gated before anything is taken
// for an orphan):
//
//  1. Build one Agent with NewAgent over your PodSyncer; give each config
//     source to AddSource under its own name: mirror.ApiserverSource for
//     the API server (the only source that may send mirror pods),
//     mirror.FileSource for manifests. Nothing is killed for its absence
//     from config before every source has delivered its first snapshot.
//  2. Add the agent's other loops (status writer, event recorder,
//     heartbeat, kubelet API server, per-pod loops) with Add, and call
//     Run once: it starts them all and stops them all. Send config changes
//     only through the sources, never to Store or Workers directly.
//  3. Report runtime events (a container exited, a probe changed) with
//     RequestSync(uid), from any goroutine.
//  4. Write the status SyncLoopOptions.OnReject hands you (an API-server
//     agent writes it to the pod), and apply the PodStatusFunc that
//     SyncTerminatingPod receives to the final status.
//  5. Give a RuntimePodLister if your runtime can list its pods, so
//     leftovers of a previous run are killed, and implement
//     podworker.RuntimePodSyncer so they can be.
//  6. Give a mirror.MirrorPodClient when there is an API server, so static
//     pods show up there; feed the mirror pods back through the API source.
//  7. Call NodeShutdown().Shutdown when the node is about to go down, then
//     end Run's ctx.
//
// # Per-pod loops
//
// The kubelet keeps probes, container lifecycle hooks, the active deadline
// and volumes as loops of their own that ask the pod workers, by UID, what
// a pod may do now. Such a loop is built from what the Agent hands out:
// Workers (the window, by UID: CouldHaveRunningContainers,
// ShouldPodContainersBeTerminating, ...), RequestSync (to have a pod synced
// when it found something), Recorder (its events); it is added with Add,
// which starts and stops it with the rest; and if it keeps state by UID it
// implements PodObserver, which the sync loop tells of the pods it hands the
// workers and of those the workers forgot (a PodLoop pairs a Runnable with
// PodObserverFuncs for a loop that has only some of the methods):
//
//	probes, _ := probe.New(agent.Workers(), probe.Options{RequestSync: agent.RequestSync, Recorder: agent.Recorder()})
//	agent.Add("probes", lifecycle.PodLoop{Runnable: probes,
//		PodObserver: lifecycle.PodObserverFuncs{PodForgottenFunc: probes.RemovePod}})
//
// The agent does exactly that for podkit's own per-pod loops when
// AgentOptions.Features is set: NewAgent builds the probe manager, the
// container hook runner, the active deadline manager, the environment
// builder and (with a VolumeRoot) the volume manager over the workers'
// window, RequestSync, the Recorder, the Clock and the Logger, and adds
// their loops ("probes", "active deadline", "container hooks",
// "volumes"), forgetting a pod's probes and deadline when the workers
// forget it. The agent supplies only what is its own — the runtime's
// ExecRunner, the getter of secrets and config maps, the TokenRequester,
// the volume root — and hands Agent.Features to its runtime, whose hooks
// call their per-pod methods:
//
//	agent, _ := lifecycle.NewAgent(rt, lifecycle.AgentOptions[Status]{
//		Features: &lifecycle.PodFeatureOptions{Exec: rt, Objects: objects, Tokens: tokens, VolumeRoot: dir},
//		...
//	})
//	rt.UsePodFeatures(agent.Features()) // before agent.Run
//
// # Lifecycle of a pod through the SyncLoop
//
//	OpAdd ---> store.SetPod ---> admission --rejected--> event + OnReject (never reaches the workers)
//	                                |
//	                             admitted ---> UpdatePod(create) ---> SyncPod ...
//	OpUpdate / OpDelete ---> store.SetPod ---> UpdatePod(update)   (a deletion carries its grace period)
//	OpRemove ---> store.RemovePod ---> UpdatePod(kill)              (once the sources are ready)
//	housekeeping ---> SyncKnownPods: finished and undesired workers are forgotten,
//	                  live undesired ones terminated; unknown active pods admitted and
//	                  re-created; orphaned mirrors deleted once their static pod is
//	                  terminated; unknown runtime pods killed
//
// Mirror pods never get a worker: an added, updated or removed mirror pod is
// an update of its static pod. A nil pod or a pod without a UID, given to
// Dispatch or to any HandlePod* method, is dropped by one rule, the same as
// podconfig.Config's: an error log line and, unless it is nil, a
// podconfig.ReasonFailedValidation event. The rules for source pods (which
// may be used, the source stamp) are applied once on each path: by the
// Config for the updates it makes, by Dispatch for any other.
//
// # Concurrency
//
// The SyncLoop's Dispatch, HandlePod* and Housekeeping methods are
// serialized with each other: they are the sync loop's critical section,
// and Run calls them from its goroutine. The callbacks they make (admission
// handlers, OnReject, the RuntimePodLister, the MirrorClient, the Recorder,
// the PodObservers) run inside that section and must not call them back;
// they may call GetActivePods, SourcesReady and Agent.RequestSync. The
// Agent's accessors and RequestSync may be called from any goroutine at
// any time. No lock of this package is held while the pod workers run
// hooks.
//
// # Where podkit differs from the kubelet
//
//   - Sources cannot lie: the config source annotation is stamped from the
//     source a pod came through (by podconfig.Config, or by Dispatch for an
//     update no Config made), so an API pod carrying
//     "kubernetes.io/config.source: file" is still an API pod, and a mirror
//     pod can only come from the API server source.
//   - There is no status manager: a pod admission rejects is remembered by
//     the SyncLoop (it is not active, and its later updates are not sent to
//     the workers) and its status is handed to SyncLoopOptions.OnReject.
//   - Housekeeping keeps mirror pods in step (the kubelet does it in its
//     SyncPod), admits the pods it re-adds, and when listing the runtime
//     fails it still does every step that does not need the list.
//   - SyncLoop.Run owns the pod workers' lifetime, and Agent.Run that of
//     every loop of the agent; the kubelet starts its pod workers lazily,
//     one goroutine per pod, from its sync loop.
package lifecycle
