// Package hollowruntime is a pod runtime with no processes: the "hollow
// node" of Kubernetes' scalability tests (kubemark), for running hundreds
// of podkit nodes on one machine. It is a podworker.PodSyncer with the
// process runtime's status type (processruntime.PodStatus), so an agent
// built on it runs every pod through podkit's engine, the status writer,
// the event recorder and the Node heartbeat exactly as over the process
// runtime: the API server sees the same status writes, events and Node
// traffic; only nothing runs. Package agent runs its pods on it with
// Config.Runtime agent.RuntimeHollow (podkit-agent --runtime hollow;
// clustertest.HollowAgent for a cluster's nodes).
//
// # What a hollow pod does
//
// Each container "runs" its Program (Options.Program; DefaultProgram):
// by default a regular container or a sidecar runs until it is stopped,
// and a regular init container completes at once with code 0; a pod may
// script a container's life with the annotation
// hollow.podkit.io/<container> (see ParseProgram): an exit code, when it
// exits on its own, whether it ignores SIGTERM. From there the life is the
// process runtime's, on Options.Clock:
//
//   - init containers run one at a time, in order, each to success;
//     sidecars (init containers with restartPolicy Always) are started in
//     their place and kept running; then every regular container starts;
//   - an exited container restarts as restartPolicy says (a failed init
//     container unless Never), the first restart at once, later ones after
//     an exponential backoff (Options.BackOff, doubled up to
//     Options.MaxBackOff), shown as CrashLoopBackOff, during which SyncPod
//     returns a podworker.RetryAfter error wrapping ErrBackOff;
//   - SyncPod reports the pod terminal when every regular container exited
//     for good, or an init container failed under Never;
//   - SyncTerminatingPod stops every container: one that exits on SIGTERM
//     ends at once (code 143), one that ignores it at the end of its grace
//     period (code 137), or at once when ctx ends;
//   - environments are built by the per-pod features (UsePodFeatures:
//     podenv, with the agent's object cache), so a missing config map or
//     secret keeps a container in CreateContainerConfigError as on a
//     kubelet, and activeDeadlineSeconds ends a pod Failed;
//   - with a pod range (StartNetwork) each pod gets an address of it, in
//     its status; the addresses reach nothing.
//
// # What it skips
//
// No process, file, volume, cgroup, namespace or network device is made;
// probes and lifecycle hooks are not run (a running container is started
// and ready); sidecars are stopped with the other containers, not in
// reverse order; the admission handler admits every pod (nothing reaches
// the host); the kubelet API's sessions and logs fail with ErrNoProcesses
// and its stats report no usage. Pods are held in memory only: a
// restarted agent starts with none.
//
// # Usage
//
//  1. New a Runtime; give it to podworker.New as the PodSyncer and as
//     Options.Status, and to the sync loop as an admission handler and
//     (RuntimePods) as the runtime pod lister.
//  2. Set Options.OnEvent and sync a pod again when a container starts or
//     exits (the process runtime's event types), as for the process
//     runtime.
//  3. Give it the per-pod features with UsePodFeatures, and the Node's
//     pod range with StartNetwork once the Node is registered.
//  4. Turn a status into a v1.PodStatus with processruntime.APIStatus.
//
// # Cost
//
// Measured with examples/kube's BenchmarkDensity (100 agents on this
// runtime, 99 in one process and one podkit-agent --runtime hollow
// process, 3,000 pods created at 20 a second, on a shared 2-core machine;
// one pass): pod startup p50 0.020 s, p99 0.227 s (the SLO: 5 s); per
// in-process agent 0.38 s of CPU until every pod ran, 1.7 ms of CPU a
// second once idle, 2.3 MiB of live heap and 3.2 MiB of RSS with its 30
// pods; the podkit-agent process 55 MiB RSS. The README has the details.
//
// # Concurrency
//
// Every method is safe for concurrent use. The engine calls the hooks of
// one UID one at a time; OnEvent is called without the runtime's lock
// held, from the hook's goroutine or from a timer's.
package hollowruntime
