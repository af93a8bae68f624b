// Package podkit is a library of pod lifecycle primitives for Kubernetes node
// agents: custom agents, virtual-kubelet providers, simulators and test
// harnesses. It takes the kubelet's pod-worker design and makes it an
// engine any agent embeds, with none of the kubelet attached.
//
// # Where to start
//
//   - podworker: the engine. PodWorkers[T] runs your PodSyncer's three
//     hooks (SyncPod, SyncTerminatingPod, SyncTerminatedPod) with one
//     serialized worker per pod UID, coalesces updates, retries and
//     resyncs by itself, and publishes the window every other loop asks.
//   - podmanager: the desired pods, with static/mirror pod translation.
//   - mirror: static and mirror pod rules, and the client that keeps mirror
//     pods in the API server.
//   - lifecycle: the agent assembly (NewAgent builds the pod workers, the
//     desired pods, the config merge and the sync loop from options; Run
//     runs and stops them with the agent's sources and loops) and the sync
//     loop (the config dispatcher HandlePod*, housekeeping);
//     lifecycle/podconfig: config sources and the merge of their
//     snapshots; lifecycle/admission: whether a new pod may run;
//     lifecycle/nodeshutdown: the node's graceful shutdown.
//   - examples/: a runnable node agent, a CRI syncer, API-server and
//     virtual-kubelet integrations.
//
// # Lifecycle
//
// Every pod UID moves forward through one timeline:
//
//	UpdatePod(create)                 termination requested           containers stopped        cleaned up
//	      |---- setup: SyncPod* ----------|--- SyncTerminatingPod+ --------|--- SyncTerminatedPod+ ---|
//	      |                               |                                |                          |
//	  CouldHaveRunningContainers: true ........................................ false from here on
//	  IsPodTerminationRequested:   false  | true .......................................................
//	  ShouldPodContainersBeTerminating:    false until the worker acts | true ..............................
//	  IsPodKnownTerminated / ShouldPodRuntimeBeRemoved:   false ...... | true ..................
//	  ShouldPodBeFinished:   false ............................................................| true
//
// SyncKnownPods (housekeeping) then forgets finished workers, and from its
// first call on, a UID the engine does not know is known not to run.
package podkit
