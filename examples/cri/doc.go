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
// # The per-pod primitives
//
// The syncer runs a pod's features through the same primitives of
// lifecycle/ as the process runtime, so both runtimes agree. An agent
// normally has its assembly build them once (lifecycle.NewAgent with
// AgentOptions.Features, Exec: NewExecRunner over the runtime) and hands
// them over with UsePodFeatures before the agent runs, as it does to the
// process runtime: the assembly runs their loops and forgets pods in
// them. An embedder that builds its own (or fakes, in tests) passes them
// as Options fields instead, declared as wide as the syncer calls them
// (features.go), and runs their loops itself; UsePodFeatures replaces all
// five at once, so a syncer never mixes an assembly's with its own:
//
//   - Env (lifecycle/podenv): each container's environment, built before
//     it is created, becomes the ContainerConfig's envs, and its command
//     and args get $(VAR) expanded. A configuration that cannot be built
//     now (a missing required secret or config map key) leaves the
//     container waiting in CreateContainerConfigError, with a Failed
//     event, retried at the pod's next sync; the pod does not fail.
//   - Volumes (lifecycle/volume): SetUp prepares the pod's volumes before
//     any container starts (the pod waits while one is not ready), and
//     each volume mount is a CRI Mount of the volume's directory (or the
//     resolved subPath in it) at its mountPath: configMap, secret,
//     downwardAPI and projected volumes read-only, an emptyDir the same
//     directory for every container. hostPath volumes are mounted by the
//     syncer itself, checked against their type.
//   - Probes (lifecycle/probe): every API status the syncer derives goes
//     through UpdatePodStatus (Started, Ready, the Ready and
//     ContainersReady conditions); a running container whose liveness or
//     startup probe failed is stopped with the probe's grace period (its
//     preStop hook first, a Killing event) and started again by its
//     restart policy. Exec probes run through CRI ExecSync: the Syncer (or
//     NewExecRunner) is the manager's ExecRunner; the others connect to
//     the sandbox's IP.
//   - Hooks (lifecycle/containerhook): postStart right after a container
//     started (a failure kills it: FailedPostStartHook, and it waits in
//     PostStartHookError until its restart), preStop before every stop of
//     a running container, within its grace period.
//   - Deadline (lifecycle/deadline): a pod past activeDeadlineSeconds is
//     reported Failed (DeadlineExceeded) and SyncPod returns terminal, so
//     the engine stops it; its final status keeps the reason.
//
// Env and Hooks default to working values (without an assembly's, a
// reference to a secret or config map cannot be resolved, and the
// container waits); without a probe manager, a deadline manager or a
// volume manager (none in Options and no UsePodFeatures, or features
// built without a VolumeRoot for volumes) a pod with probes,
// activeDeadlineSeconds or a volume other than hostPath does not run
// (Unsupported says why; its containers wait in
// CreateContainerConfigError with a Failed event), rather than run with
// the feature ignored.
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
//		Features: &lifecycle.PodFeatureOptions{ // probes, hooks, deadline, env, volumes
//			Exec:       cri.NewExecRunner(client),
//			Objects:    objects, // the secrets and config maps pods reference
//			VolumeRoot: "/var/lib/agent/cri-volumes",
//		},
//	})
//	...
//	syncer.UsePodFeatures(agent.Features()) // before agent.Run
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
//  5. Give the syncer the per-pod primitives: the assembly's, with
//     UsePodFeatures(agent.Features()) after NewAgent and before Run (the
//     assembly runs their loops); or, built yourself, as Options.Env,
//     Volumes, Probes, Hooks and Deadline, made over the pod workers as
//     their window (made before the workers: a window that forwards to
//     them once made) and the agent's RequestSync, running those that
//     have a Run. Refuse at admission, with Unsupported, the pods the
//     syncer cannot run, if you would rather not have them wait.
//
// # Concurrency
//
// Every method is safe for concurrent use. The engine calls the hooks of
// one pod one at a time and those of different pods concurrently; the
// syncer's only shared state is the restart back-off, under its own lock,
// and the primitives UsePodFeatures set, read atomically once per hook.
// SyncTerminatingPod stops a pod's containers in parallel. The Waiting
// states of containers that could not be created are kept under a lock of
// their own; the primitives are called with no lock of the syncer held.
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
// # Where it differs from the kubelet
//
//   - A container's Waiting reason (CreateContainerConfigError,
//     PostStartHookError, CrashLoopBackOff) lives in the syncer's memory,
//     as the kubelet's reason cache: an agent that restarts shows
//     ContainerCreating (or the last exit) until the next attempt fails.
//   - A pod that needs a primitive the syncer was not given (neither in
//     Options nor by UsePodFeatures) waits with CreateContainerConfigError
//     (the kubelet always has them).
//   - A subPath is resolved by lifecycle/volume and passed to the runtime
//     as a path (the kubelet bind-mounts an open descriptor of it, so a
//     container that swaps a link in between cannot redirect the mount);
//     a hostPath subPath is joined without resolving links.
//   - recursiveReadOnly IfPossible mounts plain read-only (the kubelet asks
//     the runtime whether it can); Enabled asks the runtime for it.
//   - The API status is reported at the start of each sync: a readiness
//     change is seen at the sync the probe manager asks for.
//
// Not done here, by design (they are an agent's own hooks): image pulls,
// resource limits, the termination message file, and replacing a
// container whose spec changed.
package cri
