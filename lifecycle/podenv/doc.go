// Package podenv builds a container's environment as the kubelet builds it
// (makeEnvironmentVariables), for any runtime: the variables of envFrom
// sources and env entries (value with $(VAR) expansion, fieldRef,
// resourceFieldRef, configMapKeyRef, secretKeyRef, fileKeyRef), the
// service variables, and the expansion of a container's command, args and
// subPathExpr against them.
//
// Secrets and config maps come through Objects, a two-method getter the
// agent backs (per-object watches of what its pods reference, files, ...).
// The pod's and the node's IPs are inputs the runtime gives (Inputs), and
// the node's allocatable an option, so the package keeps no state of its
// own about any pod: a Builder is a function of what it is given.
//
// # Usage
//
// The embedder:
//
//  1. Creates one Builder with New(objects, Options{...}): Recorder for
//     its events, NodeAllocatable for resourceFieldRef defaults,
//     ServiceEnv for service variables, VolumeFiles (lifecycle/volume's
//     Manager) for fileKeyRef.
//  2. Makes its getter see the pod's objects before the pod's first sync
//     (a watch-based getter registers the pod: the kubelet registers a pod
//     with its secret and config map managers at each SyncPod while its
//     termination is not requested, and unregisters it in
//     SyncTerminatedPod).
//  3. In its SyncPod, for each container it is about to create, calls
//     Build(ctx, pod, container, Inputs{PodIPs, HostIPs}), then
//     ExpandCommandAndArgs and, for each volume mount with a subPathExpr,
//     ExpandSubPathExpr.
//  4. On a *ConfigError (errors.As, or IsConfigError), leaves that
//     container waiting with Reason() (CreateContainerConfigError) and
//     Message, records its usual Failed event ("Error: " + Message), goes
//     on with the pod's other containers as the kubelet does, and lets the
//     pod's next sync (a resync, or a sync requested when a referenced
//     object changes) try again. The pod does not fail.
//
// # How a runtime uses it
//
// The result is a list of names and values, in a stable order, to hand to
// the runtime as it is: a process runtime joins each as NAME=VALUE for
// exec; a CRI runtime makes each a KeyValue of the ContainerConfig's envs.
// Build is called for each start of a container, so a restarted container
// gets the current values of its references; a running container's
// environment never changes (as on a kubelet: only volumes follow their
// sources).
//
// # Concurrency
//
// A Builder is safe for concurrent use: Build and the Expand methods may
// run for any pods at once, from any goroutine. The getter, ServiceEnv,
// NodeAllocatable and VolumeFiles are called on the caller's goroutine;
// any of them panicking fails that Build with a ConfigError (logged with
// its stack), and the Builder goes on.
//
// # Bounds
//
// What outsiders control is bounded: a secret or config map larger than
// the API allows (1 MiB) is refused; the environment, the expanded
// command and args, and an env file read are each at most
// Options.MaxBytes (2 MiB by default); an expansion that would exceed
// that stops. Each breach is a ConfigError. Messages, events and logs name
// objects and keys, never values.
//
// # Where it differs from the kubelet
//
//   - The order of the variables is stable (where each name first
//     appears; envFrom keys sorted); the kubelet's follows a map's random
//     iteration. A runtime passes no two variables of one name either way.
//   - envFrom keys that are not valid names (printable ASCII other than
//     '=', after the prefix) are skipped with the event
//     InvalidEnvironmentVariableNames, as kubelets did before relaxed
//     names; the v1.37 kubelet passes every key, since the API server
//     never stores another. A value holding a NUL byte is a ConfigError
//     (the kubelet leaves it to the runtime, where exec fails). An env
//     entry whose name is not valid, or with a valueFrom naming no
//     source, and an envFrom naming neither kind of object, are
//     ConfigErrors (the API server refuses them; a static pod's manifest
//     could hold them).
//   - An empty fieldRef apiVersion means v1 (the API server's default; the
//     kubelet, which only sees defaulted pods, refuses it), and a nil
//     enableServiceLinks means true.
//   - A limit the container leaves unset reads as the pod-level limit
//     whenever the pod sets one; the kubelet uses the pod-level limit only
//     for resources the node's allocatable lists.
//   - fileKeyRef: an optional reference to a missing file defines nothing
//     (as the API documents; the kubelet fails), and a key with
//     an empty quoted value is defined, empty (the kubelet reads it as missing).
//   - Service variables come from Options.ServiceEnv: the package does
//     not list services itself.
package podenv
