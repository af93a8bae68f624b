// Package probe runs the liveness, readiness and startup probes of a
// node's pods with the kubelet's semantics (pkg/kubelet/prober), as a
// primitive any runtime uses: exec probes through the runtime's
// ExecRunner, httpGet, tcpSocket and grpc probes out of the box against
// the pod's IP (or a host the runtime names).
//
// The Manager has no idea of its own of whether a pod runs: before each
// probe it asks the pod workers' window, by UID (PodTermination). What a
// container is — its ID, whether it runs, since when — it learns from the
// statuses the runtime builds (UpdatePodStatus). What the probes decide,
// the runtime reads in its SyncPod: which containers are started and
// ready, which must be killed; a decision the runtime must act on asks
// for a sync of the pod (Options.RequestSync).
//
// # Usage
//
// An agent (lifecycle's assembly) makes one Manager for all pods, with
// the pod workers as its window, and:
//
//  1. Creates it with New(podWorkers, Options{Exec: runtime, RequestSync:
//     agent.RequestSync, Recorder: ..., Clock: ..., Logger: ...}).
//  2. Runs it: go m.Run(ctx). Run returns once ctx ends and every check
//     in flight has returned.
//  3. In the runtime's SyncPod, for each running container, asks
//     ShouldRestart(pod, name, containerID): a liveness or startup
//     failure names the message and grace period to kill it with; the
//     runtime kills it (running its preStop hook, lifecycle/containerhook)
//     and starts it again by its restart policy.
//  4. After starting what it starts, builds the pod's status (container
//     statuses with ContainerID and State, PodIP, phase) and passes it to
//     UpdatePodStatus, which registers the pod's probes, records each
//     container's current run, and fills in Started, Ready and the
//     ContainersReady and Ready conditions. The same in
//     SyncTerminatingPod, for the status it reports while the containers
//     stop (readiness still counts then).
//  5. Calls RemovePod(uid) in SyncTerminatedPod (the manager would also
//     forget the pod at its next due probe, once the window says it
//     cannot run).
//  6. Optionally refuses at admission, with Validate's errors, pods whose
//     probes cannot run.
//
// # How a runtime uses it
//
// The process runtime and the CRI syncer use it alike: each has an
// ExecRunner (a process in the container's namespaces; CRI ExecSync with
// the container ID and the timeout), reports ContainerIDs that change
// with every run of a container (or the same ID with a new start time),
// and puts the pod's IP in its status: for a runtime whose pods share the
// node's network, Options.Host "127.0.0.1" makes the probes connect
// there. Nothing else is runtime-specific: the API is the v1 types.
//
// # Semantics
//
// One worker per (pod, container, probe type), for regular containers and
// sidecars. It probes every periodSeconds (10) from the time it is made
// (in the manager's first period, after a random part of a period, so a
// restarting agent does not probe everything at once), skips while the
// container's run is younger than initialDelaySeconds, and each check
// ends at timeoutSeconds (1). A decision takes successThreshold (1)
// successes or failureThreshold (3) failures in a row. Before its first
// decision a run is not ready, is not started while it has a startup
// probe, and is live. Liveness and readiness probes do not run until the
// startup probe passed and a status built since (UpdatePodStatus) reported
// the container started (the success asks for that sync, and readiness is
// then checked at once); the startup probe does not run after. After a
// liveness failure, or a startup decision, the worker waits for the
// container's next run. A check that cannot be made at all (an exec runner
// error, an unknown port name) is tried three times and then decides
// nothing (an Unhealthy "errored" event). Once the pod's termination is
// requested, every probe of the pod stops (liveness then holds success)
// and its containers are reported not ready; once the window says the pod
// cannot have running containers, its probes are dropped.
//
// httpGet: the scheme (HTTP by default, HTTPS without certificate
// verification), path, port (by number or by the container's port name),
// host (the pod's IP by default) and headers of the probe; User-Agent
// "kube-probe/1.37" and "Accept: */*" unless set; no proxy, no keep-alive;
// redirects followed to the same host only (one elsewhere is a success
// with a ProbeWarning event); 200–399 is a success; the first 10 KiB of a
// body are read. protocol HTTP2 uses HTTP/2 over cleartext. tcpSocket:
// a connection opens. grpc: the health service answers SERVING for the
// probe's service name (TLS without verification in mode TLS). exec: the
// command, with $(VAR) references to the container's literal env values
// expanded, exits 0; its first 10 KiB of output go in the event.
//
// Events (the kubelet's reasons, on the container): Warning Unhealthy
// "Liveness probe failed: <output>" for each failed check, Warning
// Unhealthy "... probe errored and resulted in unknown state: <error>",
// Warning ProbeWarning "... probe warning: <output>".
//
// # Concurrency
//
// Every method is safe for concurrent use. One goroutine (Run) keeps the
// timers: a probe that is not being checked costs a heap entry and no
// goroutine or timer of its own, whatever its period. Each check runs on a
// goroutine of its own while it runs (an exec check on two: the runner's
// own, so that a runner that ignores its ctx is abandoned at the timeout;
// the probe then runs no new exec until that call returns, and Run waits
// for it). The lock is never held while the window, the runner,
// RequestSync or the Recorder run; a panic in any of them is recovered and
// logged (a panicking runner is a check that errored).
//
// # Where it differs from the kubelet
//
//   - Readiness is false, and readiness probes stop, as soon as the pod's
//     termination is requested (the kubelet goes on probing readiness of
//     a terminating pod, which EndpointSlices then report as serving):
//     a pod on its way out is taken out of its Services at once.
//   - Goroutines follow checks, not probes (the kubelet keeps a goroutine
//     and a ticker per probe).
//   - A deleted or terminating pod's startup probe stops keeping its last
//     result: a container that never passed it is never reported started
//     (the kubelet sets it to success for a deleted pod).
//   - Liveness and readiness begin once a status reported the startup
//     success (the kubelet begins them at whichever of their ticks first
//     finds the success in its status manager), so when they begin
//     does not hang on the order of goroutines.
//   - A new run resets the success/failure streak too (the kubelet carries
//     it over from the previous container).
//   - An adopted container keeps the Started and Ready its pod's API
//     status shows for the same ContainerID (the kubelet guesses from the
//     container's start time against its own restart).
//   - A grpc probe of a closed port fails at once, instead of retrying the
//     connection until its timeout.
//   - protocol HTTP2 and grpc mode TLS are honoured (behind alpha feature
//     gates in the kubelet 1.37).
//   - Probes that cannot run are errors (UpdatePodStatus, Validate), and
//     such a probe never passes; the kubelet relies on the API server.
package probe
