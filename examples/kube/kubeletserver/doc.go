// Package kubeletserver serves the read endpoints of the kubelet API that
// kubectl and monitoring rely on, for a node agent built on podkit:
//
//   - GET /containerLogs/{namespace}/{pod}/{container}: a container's log,
//     with the query of v1.PodLogOptions (follow, previous, timestamps,
//     tailLines, sinceSeconds, sinceTime, limitBytes), which is what the
//     API server's pods/log subresource (kubectl logs) proxies to;
//   - GET /healthz: the agent's health checks;
//   - GET /metrics: a Prometheus registry, in the text exposition format.
//
// It serves HTTPS only. A request gets in when its credential is verified
// and the API server authorizes it, as the kubelet does it with webhook
// authentication and authorization: a client certificate signed by the
// client CA (the API server's kubelet client certificate, for example) or a
// bearer token the API server's TokenReview accepts identifies the user, and
// a SubjectAccessReview decides, for the Node resource of this node, with
// the kubelet's subresources: "proxy" for container logs, "metrics" for
// /metrics, "healthz" (or "proxy") for /healthz. Anonymous requests are
// refused with 401, unauthorized ones with 403.
//
// # Usage
//
// Create a Server with New, listen with net.Listen, publish the port in the
// Node's status.daemonEndpoints.kubeletEndpoint with an InternalIP address
// the API server can reach (kube.PublishKubeletEndpoint), and call Serve
// from a goroutine of its own. Serve returns once ctx ends and every
// request has finished.
//
// # Limits
//
// Request headers are read within ReadHeaderTimeout and are at most
// MaxHeaderBytes. At most Options.MaxLogStreams log requests run at once;
// more get 429 Too Many Requests. A followed log streams as long as the
// container writes and the client listens (as the kubelet's), so it has no
// time limit; a plain one ends with the log file.
package kubeletserver
