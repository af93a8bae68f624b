// Package kubeletserver serves the kubelet API of a node agent built on
// podkit, with the kubelet's paths, parameters, protocols and
// authorization:
//
//   - GET /containerLogs/{namespace}/{pod}/{container}: a container's log,
//     with the query of v1.PodLogOptions (follow, previous, timestamps,
//     tailLines, sinceSeconds, sinceTime, limitBytes), which is what the
//     API server's pods/log subresource (kubectl logs) proxies to;
//   - /exec, /attach (GET or POST, .../{namespace}/{pod}[/{uid}]/{container})
//     and /portForward (.../{namespace}/{pod}[/{uid}]): the sessions of
//     kubectl exec, cp, attach, run -it, debug -it and port-forward, over
//     SPDY (what the API server sends a kubelet) and WebSocket (what
//     kubectl speaks, passed through by the API server to nodes that
//     declare ExtendWebSocketsToKubelet): v1 to v5.channel.k8s.io, the
//     portforward.k8s.io channels and SPDY tunnelled in WebSocket;
//   - GET /stats/summary: the Summary API (k8s.io/kubelet's stats
//     v1alpha1), and GET /metrics/resource: the resource metrics under the
//     kubelet's names (node_cpu_usage_seconds_total,
//     container_memory_working_set_bytes, ...), which metrics-server
//     scrapes for kubectl top;
//   - GET /pods and /runningpods/: the pods bound to the node and those
//     the runtime runs, as v1 PodLists;
//   - GET /healthz: the agent's health checks;
//   - GET /metrics: a Prometheus registry, in the text exposition format.
//
// It serves HTTPS only. A request gets in when its credential is verified
// and the API server authorizes it, as the kubelet does it with webhook
// authentication and authorization: a client certificate signed by the
// client CA (the API server's kubelet client certificate, for example) or a
// bearer token the API server's TokenReview accepts identifies the user, and
// a SubjectAccessReview decides, for the Node resource of this node, with
// the kubelet's subresources: "proxy" for container logs, exec, attach and
// port-forward, "stats" for /stats, "metrics" for /metrics and
// /metrics/resource, "pods" (or "proxy") for /pods and /runningpods,
// "healthz" (or "proxy") for /healthz. Anonymous requests are refused
// with 401 (and their connection closed), unauthorized ones with 403; a
// review that fails refuses.
//
// # Streaming
//
// exec, attach and port-forward are served the kubelet's way: the
// session's URL is asked of a streaming server, and the client's
// connection is proxied to it with the API machinery's upgrade-aware
// proxy, translating a WebSocket v5 exec or attach to SPDY and unwrapping
// tunnelled port-forwards (k8s.io/apiserver's stream translator). A CRI
// runtime has a streaming server of its own (Options.StreamURLs, which
// *cri.Syncer implements with CRI Exec, Attach and PortForward). For a
// runtime whose processes the agent reaches itself (Options.Streaming, a
// Streamer such as the process runtime), the Server runs one in memory,
// reachable only through its own proxy, with the kubelet's CRI streaming
// libraries (k8s.io/cri-streaming's remotecommand and portforward): the
// runtime only gets plain streams, a terminal size channel and a
// connection per forwarded port. No framing is written here.
//
// # Usage
//
// The embedder's duties:
//
//  1. Create a Server with New: the node's name, a serving certificate,
//     the client CA, a client the API server accepts for TokenReviews and
//     SubjectAccessReviews, and a way to find pods by name; then what the
//     runtime offers (ContainerLogs, Streaming or StreamURLs, Stats,
//     BoundPods, RunningPods).
//  2. Listen with net.Listen, and publish the port in the Node's
//     status.daemonEndpoints.kubeletEndpoint with an InternalIP address
//     the API server can reach (nodestatus.PublishKubeletEndpoint).
//  3. To have kubectl's WebSocket streams reach the node as they are,
//     declare ExtendWebSocketsToKubelet in the Node's
//     status.declaredFeatures, as a kubelet 1.37 does; otherwise the API
//     server translates them to SPDY first. Both work.
//  4. Call Serve from a goroutine of its own. It returns once ctx ends
//     and every request and session has finished.
//
// # Concurrency
//
// New and Serve are called once. The runtime's callbacks (ContainerLogs,
// Streamer, StreamLocator, StatsProvider, Pods, BoundPods, RunningPods)
// are called from the requests' goroutines, concurrently; each request's
// context ends when its client leaves, its stream idles out, or Serve
// shuts down.
//
// # Limits
//
// What an outsider controls is bounded, as the kubelet bounds it and
// more, since every client of a node arrives as the API server's one
// identity:
//
//   - Long-lived streams (followed logs, exec, attach and port-forward
//     sessions) are capped at Options.MaxStreams at once, and at
//     Options.MaxStreamsPerPod for one pod; more get 429 Too Many
//     Requests with the cap in the message. A stream that carries nothing
//     for Options.StreamIdleTimeout ends (a CRI runtime's sessions have
//     its own timeout, containerd's stream_idle_timeout). A followed log
//     also ends after ReadTimeout, as on the kubelet.
//   - Plain log reads have a cap of their own, Options.MaxLogReads, so
//     streams cannot starve an administrator's kubectl logs --tail.
//   - At most Options.MaxConnections connections are open; more wait in
//     the listen queue. A connection that completes no TLS handshake and
//     no request headers within Options.ReadHeaderTimeout is closed, as is
//     one idle between requests for Options.IdleTimeout, and one whose
//     request carried no valid credential, right after its 401.
//   - Headers (and so URLs and commands) are at most MaxHeaderBytes.
//   - sinceSeconds, tailLines and limitBytes take any value an int64
//     holds, saturating to the whole log; larger ones are 400 with the
//     range in the message, negative ones 422 as on the kubelet.
//
// # Where it differs from the kubelet
//
//   - The node's figures of /stats/summary and /metrics/resource are read
//     from /proc (CPU time of /proc/stat, memory of /proc/meminfo less
//     inactive file pages), not from the root cgroup through cAdvisor;
//     the pods' come from the runtime (StatsProvider). No system
//     containers, file systems, networks or volumes are reported for the
//     node, and nothing is reported as zero that was not measured.
//   - Not served: /run, /checkpoint, /configz, /debug, /logs (node logs),
//     /stats/... other than the summary, /metrics/cadvisor and
//     /metrics/probes.
package kubeletserver
