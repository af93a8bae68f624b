// Package containerhook runs containers' postStart and preStop hooks —
// exec, httpGet and sleep actions — as the kubelet's lifecycle handler
// runner does (pkg/kubelet/lifecycle/handlers.go, with the hook calls of
// pkg/kubelet/kuberuntime), for any runtime.
//
// A Runner keeps no state of pods and has no loop: a runtime calls
// PostStart right after it started a container and PreStop right before
// it stops one, on the goroutine that does so, and acts on the result:
// a failed postStart hook means killing the container (ErrPostStartHook);
// PreStop returns the grace period the stop has left.
//
// # Usage
//
//  1. An agent makes one Runner: New(Options{Exec: runtime, Recorder:
//     ..., Clock: ..., Logger: ...}).
//  2. The runtime, after starting a container in SyncPod, calls
//     PostStart(ctx, Container{Pod, Name, ID, Host}) with SyncPod's ctx.
//     On an error matching ErrPostStartHook it kills the container (a
//     Killing event with the message "FailedPostStartHook", the preStop
//     hook running as for any kill), records the start as failed with the
//     HookError's Reason and Message, and leaves the restart to the
//     container's restart policy and back-off.
//  3. Before stopping a container (SyncTerminatingPod, or a kill in
//     SyncPod for a failed liveness probe), it calls PreStop(ctx, c,
//     gracePeriod) with the grace period it was given, and stops the
//     container with max(left, MinimumGracePeriodSeconds).
//  4. When the agent shuts down, after the pod workers' Run returned, it
//     calls Wait, which returns once every exec call a hook started has
//     returned.
//
// # How a runtime uses it
//
// The process runtime and the CRI syncer use it alike: the Runner needs
// an ExecRunner (lifecycle/probe's: the same type) for exec hooks, the
// container's ID as the runtime reports it, and the pod's IP (or
// "127.0.0.1" where pods share the node's network) for httpGet hooks that
// name no host. Nothing else is runtime-specific.
//
// # Semantics
//
// exec runs the hook's command as written (no $(VAR) expansion) in the
// container; exit 0 succeeds. httpGet sends the request with the probes'
// client rules (lifecycle/probe: no proxy, HTTPS without certificate
// verification, same-host redirects, User-Agent "kube-lifecycle/1.37")
// and succeeds on any response — the kubelet does not read a hook
// response's status; an HTTPS request answered in plain HTTP is sent again
// as HTTP without its Authorization header (a LifecycleHTTPFallback event).
// sleep waits its seconds on the clock (0: not at all). A tcpSocket hook,
// or a hook with no action, fails, as on a kubelet. A failed hook's
// message (the kubelet's "Exec lifecycle hook ([cmd]) for Container ...
// failed - error: ..., message: ...") is logged at V(1) and returned in a
// HookError; its event says only "PostStartHook failed" or "PreStopHook
// failed", as the kubelet's, so that no output leaks into events.
//
// A preStop hook runs only with a grace period above 0, and within it: it
// is cut when the grace period has passed (no event: the kubelet just
// stops waiting) and the time it took, in whole seconds, is deducted from
// the grace period the stop gets.
//
// # Concurrency
//
// A Runner is safe for concurrent use: hooks of many containers run at
// once, each on its caller's goroutine. An exec hook's runner call runs on
// a goroutine of its own, so that a runner that ignores its ctx does not
// hold the hook past its end; Wait waits for such calls. A panicking
// runner is a failed hook; a panicking Recorder is logged and survived.
//
// # Where it differs from the kubelet
//
//   - PostStart is bounded by its caller's ctx, which the pod workers end
//     when the pod's termination starts: a hanging postStart hook no longer
//     holds a pod's deletion (the kubelet runs it with a ctx nothing
//     cancels).
//   - A preStop hook is cut when its grace period ends, or when the grace
//     period is shortened (ctx), rather than abandoned running: its exec
//     call and its HTTP request are told to stop.
//   - PreStop does not itself wait for the sidecar termination order: a
//     runtime that orders the stop of sidecars deducts that wait from the
//     left grace period before applying MinimumGracePeriodSeconds.
package containerhook
