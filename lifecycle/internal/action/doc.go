// Package action runs the actions a pod spec attaches to a container —
// exec, httpGet, tcpSocket and grpc — the way the kubelet runs them for
// probes (pkg/probe) and for lifecycle hooks (pkg/kubelet/lifecycle), so
// lifecycle/probe and lifecycle/containerhook share one implementation.
//
// Each action returns a Result: Success, Warning (a success the pod's
// events should mention: an HTTP redirect to another host), Failure (with
// the message the kubelet puts in its Unhealthy event), or Unknown with an
// error (the action could not be run at all: a port name the container
// does not declare, an exec runner that failed or panicked).
//
// # Bounds
//
// What the container controls is capped: an HTTP response body and an
// exec command's output are read up to MaxOutput (10 KiB, the kubelet's
// cap) and the rest is dropped; a redirect chain stops after 10 hops.
// Time is the caller's: every action ends when its ctx does, and
// WithTimeout makes a ctx that ends after a timeout on an injected clock,
// so a probe's timeoutSeconds is measured on the same clock as its period.
//
// # Concurrency
//
// Every function and method is safe for concurrent use. Exec calls the
// runner on a goroutine of its own, tracked by a Calls, so that a runner
// that ignores its ctx cannot hold the caller past its timeout; the
// caller waits for Calls when it shuts down.
package action
