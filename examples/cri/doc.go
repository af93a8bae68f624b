// Package cri runs pods through the Kubernetes Container Runtime Interface:
// a podworker.PodSyncer that creates real pod sandboxes and containers in a
// CRI runtime such as containerd.
//
// Syncer implements the three phases of a pod's life over the CRI's two
// narrow roles, criapi.PodSandboxManager and criapi.ContainerManager:
//
//   - SyncPod runs the pod's sandbox (pod network through the runtime's CNI
//     plugins, or the node's network for HostNetwork pods), its init
//     containers in order, each to success, then its containers; it
//     restarts exited containers as the restartPolicy says, with an
//     exponential back-off, and reports the pod terminal when it has
//     finished. Images must already be on the node: nothing is pulled.
//   - SyncTerminatingPod stops the containers, each with the grace period
//     as its timeout, then the sandboxes, and returns only when nothing of
//     the pod runs. A cancelled context kills what is left at once.
//   - SyncTerminatedPod removes the containers and sandboxes (idempotent).
//   - SyncTerminatingRuntimePod stops and removes a pod only the runtime
//     knows; ListRuntimePods finds such pods for housekeeping.
//
// Syncer is also the engine's podworker.StatusSource (PodStatus, read from
// ListPodSandbox, PodSandboxStatus, ListContainers and ContainerStatus by
// the pod UID label) and podworker.StoppedChecker. PodStatus.APIStatus
// derives a v1.PodStatus from it: pod IPs, container states and exit
// codes, restart counts, conditions and the phase.
//
// For the kubelet API of the node (examples/kube/kubeletserver), the
// Syncer also answers what a kubelet asks its CRI runtime:
//
//   - GetExec, GetAttach and GetPortForward return the URL of the
//     runtime's own streaming server for a session (CRI Exec, Attach and
//     PortForward on the pod's running container or ready sandbox): the
//     kubelet API proxies kubectl exec, attach, cp and port-forward there,
//     and the runtime's streaming does the work;
//   - PodStats measures the running pods with ListContainerStats and
//     ListPodSandboxStats (Options.Stats), for the Summary API and the
//     resource metrics (kubectl top);
//   - RunningPods lists the pods that run now, for /runningpods.
//
// Client speaks the CRI over gRPC to a runtime's unix socket and serves
// every role the Syncer takes; tests use cri-api's FakeRuntimeService
// instead.
//
// # Usage
//
//	client, err := cri.Dial("unix:///run/containerd/containerd.sock")
//	...
//	syncer, err := cri.New(client, client, cri.Options{Images: client})
//	...
//	agent, err := lifecycle.NewAgent(syncer, lifecycle.AgentOptions[*cri.PodStatus]{
//		Workers: podworker.Options[*cri.PodStatus]{
//			Status:         syncer,          // status read right before each hook
//			ResyncInterval: 2 * time.Second, // how soon exits and restarts are noticed
//		},
//		SyncLoop: lifecycle.SyncLoopOptions{RuntimePods: syncer}, // housekeeping kills orphans
//	})
//
// The embedder's duties:
//
//  1. Put the images on the node (ctr images import, a puller of your own):
//     the syncer reports ErrImageNotPresent, naming the image, and the
//     engine retries with back-off.
//  2. Choose a ResyncInterval: the syncer does not watch the runtime, so a
//     container that exits (to be restarted, or finishing the pod) is
//     noticed at the next sync of its pod.
//  3. Pass Options.OnStatus to publish the derived API status.
//  4. Give housekeeping the Syncer as its runtime pod lister, so sandboxes
//     left over from a crash are stopped and removed.
//
// # Concurrency
//
// Every method is safe for concurrent use. The engine calls the hooks of
// one pod one at a time and those of different pods concurrently; the
// syncer's only shared state is the restart back-off, under its own lock.
// SyncTerminatingPod stops a pod's containers in parallel.
//
// # Lifecycle
//
// A pod's sandbox carries the pod's labels plus LabelPodName,
// LabelPodNamespace, LabelPodUID and LabelManaged; each container carries
// those and LabelContainerName, and its CRI attempt counts its restarts. A
// restart replaces the exited instance with a new one and removes older
// dead instances, so the last exit stays visible. When a sandbox dies, the
// next SyncPod stops what is left of it and runs a new one with the next
// attempt number (a restartPolicy Never pod whose containers ran is
// reported terminal instead). Nothing is removed before SyncTerminatedPod
// (or SyncTerminatingRuntimePod for an orphan).
//
// Not done here, by design (they are an agent's own hooks): image pulls,
// volumes (volumeMounts are ignored), probes and lifecycle hooks,
// resource limits, env valueFrom/envFrom (rejected with ErrUnsupported),
// and replacing a container whose spec changed.
package cri
