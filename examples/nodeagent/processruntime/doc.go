// Package processruntime is a podworker.PodSyncer that runs each container
// of a pod as a local OS process: the runtime of the example node agent,
// and a complete model of what a runtime owes the pod workers.
//
// A container is its command and args (resolved with its image's
// configuration, see Images and commands below), run with its env in its
// workingDir (by default the pod's scratch directory), as the leader of a
// process group of its own, its stdout and stderr drained by a log shim into
// rotated log files (see Logs below), inside its pod's sandbox where the
// machine allows one (see Sandbox below): a user, mount, PID, IPC, UTS
// and network namespace of the pod's own, its securityContext applied. The
// image is recorded, never pulled. Restarts follow the pod's restartPolicy with the
// kubelet's exponential backoff; init containers run first, in order, each
// to success, sidecars (restartPolicy Always) each until it is started,
// then kept running (see Sidecars below). Termination is SIGTERM to each group, the grace period, then
// SIGKILL; a cancelled context escalates at once. Every process a pod
// started is then killed, wherever it went (see Containment).
//
// # Usage
//
//  1. Open a Runtime over a state directory. Processes a previous run left
//     there are adopted (they keep running) and their pods listed by
//     RuntimePods.
//  2. Give it to podworker.New as the PodSyncer and as Options.Status
//     (T is PodStatus); it is also a podworker.RuntimePodSyncer, so
//     housekeeping can kill pods no config wants.
//  3. Set Options.OnEvent and sync a pod again when one of its containers
//     exits (lifecycle.Agent.RequestSync), so restarts and completion are
//     acted on at once rather than at the next resync.
//  4. Give lifecycle.SyncLoopOptions.RuntimePods a lister over
//     RuntimePods, and list the Runtime among the admission handlers
//     (Admit), so the pods Runtime.ValidatePod refuses fail at once with
//     its reason. Name in Options.Masks the agent's own credentials and
//     configuration, and decide Options.AllowHostAccess (off: privileged
//     and host-namespace pods are refused).
//  5. Report Containment at startup, and what Containment().Limits.Missing
//     lists (the machine has no controller for it) in the Node's
//     conditions or events.
//  6. From housekeeping, once every config source has delivered its pods,
//     call PruneTombstones with whether config still has each UID, so the
//     logs of a pod that ended last as long as the pod is in config.
//  7. Turn a PodStatus into a v1.PodStatus with APIStatus.
//  8. Serve the kubelet API's sessions and figures from Exec, Attach,
//     PortForward, PodStats and RunningPods (see Sessions and Stats
//     below), each called from the request's goroutine.
//
// # Images and commands
//
// The runtime pulls no image: a container runs the node's own program of
// its command. A container without a command takes it from its image's
// configuration (entrypoint, cmd, workingDir, env, user): Options.ImageConfigs
// (an ImageTable, LoadImageTable's file format), then DefaultImageConfigs
// (busybox, alpine, debian, ubuntu, python, perl, nginx, ..., by repository
// name whatever the registry, tag or digest), by Kubernetes' rules: command
// wins over the image; args alone go after the image's entrypoint (busybox
// has none, so its args [sh, -c, ...] run sh); neither runs entrypoint +
// cmd. The image's env is under the container's, its workingDir the
// default, its user the default of runAsUser (after Options.ImageUsers).
// Each container that runs says once, in a PodWarning (ReasonHostProgram),
// that the node's program stands in for the image's.
//
// A container whose command cannot be resolved (no command, and an image
// in no table) waits in CreateContainerConfigError, one with no command at
// all in CreateContainerError, each with a ContainerFailed event and
// retried at each SyncPod; a program that does not exist is a failed start
// (exit 128, StartError), shown waiting in RunContainerError and, once its
// restart backs off, CrashLoopBackOff. None of these fails the pod by
// itself, so a controller does not replace it (under restartPolicy Never
// a failed start ends the pod Failed, as on a kubelet).
//
// What differs from a kubelet: an image in no table with a command of its
// own runs (its entrypoint, env and user unknown, taken as none); the
// defaults leave out the entrypoint scripts that only prepare an image
// (nginx's, node's: docker-entrypoint.sh) and the env describing the
// image's own programs; with neither the container's nor the image's
// workingDir, the process runs in the pod's scratch directory, not "/";
// a missing working directory is a failed start, not created.
//
// # Sidecars
//
// Init containers with restartPolicy Always run as on a kubelet: each is
// started before the init container after it runs; each is restarted
// whenever it exits (with the restart backoff), whatever the pod's
// restartPolicy; before the pod is initialized an exited sidecar holds the
// init containers after it back until it runs again. They do not keep a
// pod from its end: once the regular containers are done (a Job's pod
// succeeded), SyncPod reports the pod terminal and no sidecar restarts.
// SyncTerminatingPod stops the regular and ephemeral containers first,
// then the sidecars one at a time in the reverse of their order, within
// the one grace period (each sidecar given at least 2 seconds, the
// kubelet's minimum). A running sidecar is Started and Ready (no probes
// yet); an exited one neither.
//
// # State directory
//
// Each pod has a directory named by its UID, holding its identity, one
// record per container (PID, process group, start time in clock ticks
// since boot, and the boot ID, so a reused PID is never taken for the
// container's process), its logs and its scratch directory.
// SyncTerminatedPod removes the scratch directory and keeps the rest as the
// pod's tombstone: its logs and its containers' final states, still
// readable (ReadLogs, PodStatus) while config has the pod, and removed by
// PruneTombstones once it has not. A restarted agent reads tombstones back,
// so a pod that finished under its restart policy is reported terminal by
// SyncPod instead of running again, while a container due for a restart
// (restartPolicy Always) is started again. A UID cleaned up in the same
// run starts clean when it is synced again. One Runtime at a time may use
// a state directory.
//
// A sandboxed pod's directory also holds sandbox.json (its range of host
// IDs and its init), sandbox/ (the init's control socket, the stages'
// log, the empty directory its root is built on) and volumes/ (its
// emptyDir volumes). The state directory holds cgroup.v1 (the cgroup v1
// directories limiting its pods) and network/ (the pod network's).
//
// # Sandbox
//
// Where the machine allows it (Options.Sandbox; Containment says), each
// pod runs in a sandbox of its own, made by the agent's own executable run
// again, or Options.StageExecutable (package internal/sandbox: a spawner
// as host root, the runtime's one, that builds each pod's root and starts
// its init; the pod's init; a stage per container; Go cannot act between
// fork and exec; see Cost of a start):
//
//   - Identity: a user namespace mapping the pod's IDs 0-65535 onto a
//     range of host IDs no other live pod has, of this runtime or another
//     on the machine (Options.IDBase, 65536 a pod, claimed in the
//     machine's Options.IDRegistry and recorded in the pod's directory;
//     never host root; MapIDs gives a volume manager the same range). Without
//     runAsUser a container runs as its image's user (Options.ImageUsers;
//     none known: root), root inside the pod but an unprivileged host ID;
//     runAsUser, runAsGroup, supplementalGroups and fsGroup apply inside
//     the namespace, so two pods with the same runAsUser are two host
//     users. runAsNonRoot refuses a container that would run as root: it
//     waits in CreateContainerConfigError with the kubelet's message, and
//     a ContainerFailed event.
//   - Files: the host's root file system seen through an overlay, its
//     other file systems read-only, all nosuid and nodev; the pod's writes
//     kept in memory, private to it, and only where the pod owns the
//     directory (its "/", and what anyone may write, as /var/tmp): host
//     files belong to IDs its user namespace does not map. Its own /tmp,
//     /run, /dev (null, zero, full, random, urandom, tty, pts, shm, mqueue)
//     and /proc; the state directory (and with it every other pod's
//     directory and every log) and Options.Masks covered by empty
//     directories or files; its scratch directory at ScratchPath; its
//     volumes at their mountPaths (emptyDir, Memory emptyDir, hostPath
//     where allowed, the others from Options.Volumes), with subPath,
//     subPathExpr, readOnly and recursiveReadOnly. readOnlyRootFilesystem
//     makes the root, /tmp and /run read-only.
//   - Namespaces: PID (the init, its PID 1, reaps the pod's orphans and
//     takes every process of the pod with it when it is killed), IPC, UTS
//     (the pod's hostname), mount, network (see Network).
//   - Each container: capabilities as containerd gives them, without those
//     its spec drops and with those it adds (of the pod's user namespace:
//     none acts on the host); allowPrivilegeEscalation: false as
//     no_new_privs; seccompProfile RuntimeDefault as a filter written here
//     (refusing what Docker's and containerd's default profile refuses);
//     procMount Unmasked; the pod's namespaced sysctls.
//   - What reaches the host (privileged, hostNetwork, hostPID, hostIPC,
//     hostUsers: true, hostPath volumes) runs only with
//     Options.AllowHostAccess (Runtime.ValidatePod refuses it otherwise,
//     ReasonHostAccessNotAllowed): privileged and hostUsers pods then have
//     no user namespace (their root is the host's), privileged ones the
//     host's /dev and every capability the agent has.
//
// The init is the agent's child and outlives the agent as the containers
// do; it starts each container process on request over the pod's control
// socket, in two steps so the runtime records the process's host PID and
// puts it in its container's cgroup before its command runs, signals its
// process group for the runtime, and reports its exit (its code included,
// even for an exit while no agent ran). A restarted runtime reconnects to
// each init and lists what ran; a pod whose init it cannot reach is
// killed whole. The log shims stay outside, as host root: the containers'
// stdout and stderr pipes cross into the pod.
//
// Without a sandbox (not root, no user namespaces, a kernel before 5.12,
// SandboxOff) pods run as before: as the agent's user, in the host's
// namespaces; Runtime.ValidatePod refuses the pods whose securityContext
// needs a sandbox (ReasonSandboxUnavailable), and volume mounts are not
// mounted (a VolumesNotMounted warning says so).
//
// What the sandbox cannot do:
//
//   - Hide what the host lets everyone read outside the masks: a pod
//     reads what any unprivileged user of the machine reads. Nor keep a
//     pod from what a host service offers on a non-loopback address (see
//     Network).
//   - Give each container its own root: the containers of a pod share its
//     root, /tmp, /run, /dev/shm and PID namespace (a kubelet gives each
//     container its own root, and a PID namespace unless
//     shareProcessNamespace). The pod's writes to its root, /tmp, /run and
//     /dev/shm are in memory, at most 256 MiB each, counted in its memory
//     cgroup. A container holding CAP_SYS_ADMIN of its user namespace can
//     see the other volumes of its own pod.
//   - Follow the host's root as it changes: it is the overlay's lower
//     layer, and a file the pod has looked up may not show a later change.
//   - Refuse system calls newer than its list: the RuntimeDefault filter
//     lists refusals, where the default profile lists what it allows. Only
//     the agent's architecture runs under it (amd64 and arm64).
//   - Bound a disk emptyDir as it is written (a Memory volume's sizeLimit
//     is its tmpfs size): the agent's volume manager measures a disk
//     emptyDir each refresh and the agent evicts a pod over its sizeLimit,
//     as the kubelet's eviction manager does, so a pod may write past it
//     until then.
//   - Keep a pod's processes from signalling its init (the same user): it
//     ignores every signal but SIGKILL from the host.
//   - With hostPID, end the pod's processes by killing the init (the
//     cgroup or the environment scan does).
//
// # Cost of a start
//
// A sandboxed pod's first SyncPod starts three processes of the stages'
// executable: the init, the container's stage and its log shim (each
// further container, a stage and a shim); the pod's root is built, and
// its init started, by the runtime's spawner (one process of the stages'
// for the runtime's life, started with its first sandbox, ended by Close),
// on a thread of its own. Each pays a Go program's start-up (each with one
// P: GOMAXPROCS=1), and for a large agent that is most of a pod's start:
// the Go runtime's set-up over the whole binary and every linked
// package's init, all of them before the stage's own (a stage runs from
// its package's init, and the packages it needs, net among them, are
// initialized late). Options.StageExecutable names a small program
// that links the stage packages only, cmd/podkit-stages (about 4 MB),
// built from the same source as the agent: its stages are the same, its
// start a fraction of the CPU. Open checks it with CheckStageExecutable:
// a file only root or the runtime's user may change, that answers the
// digests of its sandbox and log shim source (both packages embed their
// Go files) as the runtime's own, so a stage program left from another
// build is refused at once rather than failing pods.
// LocateStageExecutable finds one installed beside the running program
// (StageExecutableName; go build -o DIR/ of the agent and
// cmd/podkit-stages), as the example agent's --stage-executable auto
// does. BenchmarkSandboxedPodStart measures a
// start step by step (its doc says how to run it); see the example
// agent's README (examples/kube) for what it measured.
//
// Even the small program's start is most of each stage process's CPU: on a
// paravirtualized 2-core machine, about three quarters of each of the
// init, the container stage and the log shim went to the Go runtime's
// start (the first growth of its heap, about 1 ms a process there: the
// page allocator's and the arena's metadata mapped, cleared and faulted
// in, at the first allocation, which the CPU feature probe makes, so a
// profile shows it under that probe; the CPUID instructions themselves are
// under 0.1 ms; the page faults of stacks, its threads, sysmon's first
// polls) and the exit. What is left to save is processes, and each of the
// two left besides the init holds a guarantee: the container stage waits,
// before its execve, for the runtime to put it in its container's cgroup
// (a thread of the init could fork the command only after its seccomp
// filter is in place, which refuses the clone3 that could start it in that
// cgroup), and the log shim keeps a container's output flowing while the
// agent restarts.
//
// # Per-pod features
//
// With the per-pod features of an agent's assembly (lifecycle.Agent built
// with AgentOptions.Features, the Runtime as their ExecRunner, handed over
// with UsePodFeatures before the agent runs), the hooks do what a
// kubelet's do at the same points:
//
//   - SyncPod first checks activeDeadlineSeconds (past it: terminal, the pod
//     ends Failed with reason DeadlineExceeded) and sets the pod's volumes
//     up (lifecycle/volume: configMap, secret, downwardAPI, emptyDir,
//     projected with service-account tokens), at every sync; a volume that
//     cannot be set up starts nothing and the engine retries. The sandbox
//     binds each volume's directory (its mountPath, subPath, readOnly as
//     above), so updates of the sources show in running containers.
//   - It kills, with their preStop hook and the probe's grace period, the
//     running containers whose liveness or startup probe failed (a
//     ContainerKilling event whose Message is the kubelet's "Container c
//     failed liveness probe, will be restarted"), and starts them again
//     by their restart policy.
//   - Each container's environment is built at each start (lifecycle/podenv:
//     env and envFrom of every kind, with the pod's IPs and Options.HostIPs),
//     and its command and args expanded against it; a missing secret,
//     config map or key makes it wait in CreateContainerConfigError (a
//     ContainerFailed event) until a later sync finds it.
//   - After a container starts, its postStart hook runs; one that fails
//     kills it (Killing "FailedPostStartHook") and its exit carries the
//     hook's reason and message.
//   - After the starts, the probe manager is given the pod's status, and
//     each running container's ContainerStatus.Started and Ready are what
//     its probes say (Ready false while the pod terminates); APIStatus
//     turns them into the Ready and ContainersReady conditions.
//   - SyncTerminatingPod runs each container's preStop hook within the grace
//     period and stops the container with what is left of it (at least
//     2 seconds); SyncTerminatedPod forgets the pod's probes and deadline
//     and removes its volumes when the engine says they may go.
//
// Exec probes and hooks run through ExecInContainer, as an Exec does (in
// the container's view, identity and environment). Network probes and
// httpGet hooks connect to the pod's IP, or 127.0.0.1 for a pod in the
// host's network. Where it differs from a kubelet: a pod with network
// probes or httpGet hooks is refused when its sandbox has a loopback only
// (no Options.PodCIDR: nothing could reach it); a container is reported
// running while its postStart hook runs; DeadlineExceeded is not recorded
// in the state directory (a restarted agent decides it again from the
// pod's start time); the environment of an exec into a container adopted
// from an earlier run is its spec's literal values (the built one died
// with that run). Without the features, a pod asking for probes, lifecycle
// hooks or activeDeadlineSeconds is refused (ValidatePod), never run with
// them ignored.
//
// # Stdin and terminals
//
// A container with stdin: true gets a pipe as its stdin, whose write end
// its log shim holds (without: /dev/null); one with tty: true gets a
// terminal as its stdin, stdout, stderr and controlling terminal, opened
// in its pod's own devpts by the sandbox's init (on the host's for a pod
// without a sandbox), whose master its log shim holds: its output is then
// one stream, logged as stdout. So both survive an agent restart, as the
// output does. stdinOnce closes the stdin once the first attach session
// with input ends (with a terminal, input stops; the terminal still
// carries the output). The shim's attach protocol is in the logshim
// package.
//
// # Sessions: exec, attach, port-forward
//
// Exec runs a command as its container runs: through the sandbox's init,
// a process of the pod entering the mount namespace of the container's
// process (so its volumes and read-only root), with its identity,
// environment and working directory, put in its cgroup before its
// command runs; with a terminal opened in the pod when asked. An exec is
// no container: it ends with its container (its cgroup) and its pod (the
// PID namespace), its exit is only the session's, and an exec an earlier
// run of the agent left (its session went with it) is killed at Open.
// Exec needs the pod's spec, so it waits for the pod's first SyncPod of
// this run. Attach joins the log shim of the container's current
// instance: several sessions share the output, their input goes to the
// container's stdin, and leaving stops nothing. PortForward dials
// 127.0.0.1 inside the pod's network namespace, on an OS thread that
// enters it and is put back after (never left there: a thread that
// cannot be put back ends), or on the host's loopback for a pod of the
// host's network.
//
// Ephemeral containers (kubectl debug) are started by SyncPod once they
// appear in the spec, whatever the init containers do, and never again
// after they exit; they are in no phase, condition or readiness. One
// with targetContainerName runs in its target's view (as an exec does;
// the pod's PID namespace is shared by all its containers already), and
// cannot have volumeMounts, readOnlyRootFilesystem or procMount of its
// own. What the runtime cannot run in one (no command, privileged in a
// pod with a user namespace, what ValidatePod refuses) makes it wait in
// CreateContainerConfigError instead of failing the running pod.
//
// What differs from a kubelet: an exec shares its container's mount
// namespace as it is, not a copy made when the container started (the
// same, unless the container mounts things itself); port-forward reaches
// 127.0.0.1 only, not ::1.
//
// # Stats
//
// PodStats measures the pods that run (a container process runs), and
// each running container: CPU time from a cgroup v2's cpu.stat (the
// pod's and each container process's, where the runtime has a cgroup v2
// tree), else the pod's cgroup v1 cpuacct, else the /proc times of the
// processes (those of children nobody reaped are lost); memory working
// set as cAdvisor counts it (usage less inactive file pages) from the
// pod's cgroup (v2 with the memory controller, else v1), else the sum of
// the processes' Pss from /proc; network traffic of the pod's network
// namespace (/proc/<init>/net/dev, lo left out). Containers without a
// cgroup of their own are found by a scan of the process table's
// environments, once per call. A figure that cannot be read is left out,
// never reported as zero. RunningPods lists the pods with a running
// container.
//
// # Limits
//
// Each pod is limited where the kernel offers a controller
// (Containment().Limits says how, Limits.Missing what the machine lacks):
// its processes (Options.PodPidsLimit, threads included, the init's among
// them), memory and cpu from its resources (pod-level resources, or the
// sum of its containers' limits when every container has one, at least the
// largest init container's; cpu requests as a share). Through the pods'
// cgroup v2 tree where its parent offers the controllers, else the cgroup
// v1 hierarchy of each controller under the agent's own cgroup there,
// else, for pids and sandboxed pods only, RLIMIT_NPROC on the pod's host
// IDs (a bound per user of the pod, not for the pod as a whole).
// Containers are not limited one by one.
//
// # Network
//
// A sandboxed pod has a network namespace of its own. With
// Options.PodCIDR (or Runtime.StartNetwork, for a range learnt after
// Open) it is the pod network's (package internal/podnet): owned
// by the host's user namespace (the pod's root cannot give itself another
// pod's address), with an address of the range on the node's bridge,
// reported in the pod's status; pods reach each other and the node, and
// no service bound to the host's loopback (a pod's loopback is its own).
// Without, the namespace has a loopback only: the pod reaches nothing and
// nothing reaches it. hostNetwork pods (allowed only with AllowHostAccess)
// keep the host's network. What a service on the host offers on a wildcard
// address is reachable from pods on the bridge, as on any kubelet node: it
// must authenticate. There is no port forwarding (hostPort is refused), no
// NAT beyond the host, no Services.
//
// # Name resolution
//
// A sandboxed pod sees an /etc/hosts, /etc/resolv.conf and /etc/hostname
// of its own, written into its directory at each start of its sandbox,
// owned by its root (writable inside the pod, as on a kubelet) and bound
// over the host's in its mount namespace:
//
//   - /etc/hosts: the localhost names, the pod's address on the pod
//     network named by its hostname (spec.hostname, else its name, cut to
//     63 bytes), preceded, when it has a subdomain, by
//     <hostname>.<subdomain>.<namespace>.svc.<Options.ClusterDomain> (a
//     StatefulSet's pod behind its headless Service), and its hostAliases.
//     A pod without a pod network has no address line. hostNetwork pods
//     get a copy of the host's /etc/hosts followed by their hostAliases.
//   - /etc/resolv.conf, by dnsPolicy as the kubelet forms it:
//     ClusterFirst resolves through Options.ClusterDNS only, searching
//     <namespace>.svc.<domain>, svc.<domain>, <domain> and then the host's
//     domains, with ndots:5 (without ClusterDNS it falls back to Default,
//     with a MissingClusterDNS warning); Default, and ClusterFirst on the
//     host network, is the host's (Options.ResolvConf); None is the
//     pod's dnsConfig alone; ClusterFirstWithHostNet is ClusterFirst for
//     a hostNetwork pod. dnsConfig's nameservers and searches are then
//     added, its options merged by name; what a resolver would not use
//     (MaxDNSNameservers, MaxDNSSearchPaths, MaxDNSSearchListChars) is cut
//     with a DNSConfigForming warning.
//   - /etc/hostname: the pod's hostname (the host's on the host network).
//
// The files are written once per sandbox: a change of the host's
// resolv.conf reaches a running pod only when its sandbox starts again.
// The runtime runs no DNS server and no Services: a cluster DNS address
// is only as good as what answers there (the host's resolver on its
// loopback, 127.0.0.53 for systemd-resolved, is out of a pod's reach:
// point Options.ResolvConf at a file naming reachable servers). Without a
// sandbox, pods see the host's files.
//
// # Containment
//
// Every process a pod starts stops with the pod: when the pod terminates
// (SyncTerminatingPod returns nil only once none is left), when
// housekeeping kills a pod known only from the state directory
// (SyncTerminatingRuntimePod), and when a restarted agent finds that a
// container died while it was down (Open kills what it left). The runtime
// uses what Linux offers:
//
//   - The sandbox's PID namespace: when the pod stops, its init is killed,
//     and with it every process of the namespace. Its init carries the
//     pod's identifiers in its environment, so a scan of the process table
//     (ScanProcesses, Process.Sandbox) finds it with the pod.
//   - A cgroup v2 per pod, and in it one per container process, where a
//     writable cgroup v2 hierarchy exists (Options.Cgroups, CgroupParent;
//     Runtime.Containment says which containment is in use). A process is
//     started straight into its cgroup (clone3 with CLONE_INTO_CGROUP), so
//     everything it starts is in it too, whatever its session, process
//     group or environment; a container's cgroup is killed when its main
//     process ends, and the pod's (cgroup.kill) when the pod stops.
//   - Without a cgroup: each container is a process group, killed when its
//     main process ends, with every process carrying the pod's UID and the
//     container's name in its environment (EnvPodUID and EnvContainerName,
//     which children inherit); and every process carrying the pod's UID is
//     killed when the pod stops. This environment scan reads the whole
//     process table, once per container exit and once per pod stop.
//   - Pidfds, so a scanned process is killed only if it is still the one
//     the scan found, even when its PID is reused in between.
//
// A pod's cgroup goes when the pod is cleaned up; Close removes those that
// hold no process and keeps those of running pods for the next Runtime. A
// harness that stops the pods' processes itself after its runtime closed
// (package clustertest does) calls RemoveCgroups, so no empty cgroup is
// left on the machine.
//
// What it cannot contain:
//
//   - Without a cgroup, a process that both leaves its process group
//     (setsid, setpgid) and clears or rewrites its environment (env -i, or
//     by overwriting its own environ memory) is invisible to the runtime
//     and outlives its pod (and, holding the container's stdout, keeps its
//     log shim running until the pod stops, when the shim is killed after
//     Options.KillTimeout).
//   - With a cgroup, a process privileged enough to write to cgroup.procs
//     elsewhere (root, as the example agent runs its pods) can move itself
//     out of its pod's cgroup. Kernels without CLONE_INTO_CGROUP (before
//     5.7) get each process moved into its cgroup right after it starts, so
//     what it forks in that instant stays outside; kernels without
//     cgroup.kill (before 5.14) get each process of the cgroup killed in
//     turn until it is empty.
//   - Under any containment: what a pod has another service start on its
//     behalf (systemd-run, at, cron, a D-Bus activation, an ssh to
//     localhost) belongs to that service, not to the pod.
//
// The agent does not become a child subreaper (PR_SET_CHILD_SUBREAPER): it
// would make the agent the parent of every orphan of its containers, each
// to be reaped by a wait that would race the os/exec waits of the rest of
// the process, without telling which pod an orphan came from; the cgroup
// does that job. An agent run as PID 1 (in a container) should still run
// under an init that reaps orphans (tini), since it does not reap the
// processes it kills that are not its children.
//
// # Logs
//
// Each container instance (its first run, then each restart) writes to
// two pipes held by a log shim: the agent's own executable run again
// (/proc/self/exe, with an environment marker the package's init
// recognises, so any program or test binary linking the package can start
// it), or Options.StageExecutable. The shim stamps each line with the time it read it and its stream,
// splits lines longer than 16 KiB into partial records, and appends them
// in the CRI log format (the kubelet's) to the container's log files under
// LogDir, starting a new file when one would exceed
// Options.ContainerLogMaxSize and deleting the oldest beyond
// Options.ContainerLogMaxFiles, across the container's instances. So a
// container's logs never take more than MaxSize*MaxFiles bytes on disk,
// and neither the shim nor the agent holds more than a line in memory.
// ReadLogs serves them as `kubectl logs` does (Follow, Previous,
// Timestamps, TailLines, SinceTime, LimitBytes). Each instance's log is
// kept apart: the current one is the container's latest start, Previous
// the one before; older ones are deleted when an instance starts, and a
// flood in the current instance may push the previous one out of the cap.
//
// Why a shim: an agent holding the pipes itself would take the read ends
// with it when it dies, and the container would die of SIGPIPE at its
// next write; a named pipe the agent reopens after a restart leaves the
// container blocked on a full pipe meanwhile; a container writing straight
// to a file cannot be rotated safely (copy-and-truncate loses what is
// written in between) and gives no line its time or stream. One shim per
// instance, like conmon, ends with its container and keeps one
// container's flood from slowing the others; it costs about 1.3 MB of
// private memory (its program's pages are shared) and does not touch the
// agent at all. Shims get GORACE=atexit_sleep_ms=0: in a program built
// with -race (a test binary) each would otherwise sleep a second at exit.
//
// The shim runs in a process group of its own and does not carry the
// PODKIT_* variables: it is not a process of the pod, and it outlives the
// agent as the container does, so a restarted agent loses no line and the
// container is neither killed by SIGPIPE nor blocked on a full pipe while
// no agent runs. It ends at end of file, once the container and every
// process holding its stdout or stderr are gone, after writing everything
// it read. A container's exit is recorded once its shim has ended (its log
// is complete then), or after Options.KillTimeout if something outside the
// container still holds its output; SyncTerminatingPod waits for the
// pod's shims the same way and kills one still running after KillTimeout.
//
// What is lost: lines rotated away by the cap; output a reader does not
// get to before it is rotated away; and output the shim cannot write
// (disk full, the directory removed), which it counts and reports in the
// log as a stderr line once writing works again. A line a container
// writes without a newline shows once the line is complete, 16 KiB long,
// or the stream ends. Killing a shim (SIGKILL) loses what it had read but
// not written, and the container's next write gets SIGPIPE.
//
// # Concurrency
//
// Every method is safe for concurrent use; the hooks of one pod must not
// overlap, as the engine guarantees. One goroutine waits for each running
// process and ends with it (after its log shim); one waits for each log
// shim this runtime started and ends with it; one polls each adopted
// process until it ends or Close is called. Per sandbox: one goroutine
// waits for (reaps) an init this runtime started and ends with it, or
// polls an adopted one until it ends or Close; one reads the init's
// messages until the connection ends (Close ends it); one per container
// process waits for its exit from the init until it comes or Close.
// ReadLogs, Exec, Attach, PortForward and PodStats run in their caller's
// goroutine; Exec has one goroutine more per output stream and for
// resizes, ended before it returns, and one copying the client's input
// that ends when a Read of it returns (the session's end); a cancelled
// exec has one waiting for its process's end to drop it from the init's
// table.
//
// The runtime reads /proc, so it works on Linux only; elsewhere Open
// returns an error.
package processruntime
