// Package nodemetrics gives a podkit node agent the Prometheus metrics
// that people already scrape from kubelets, through the Prometheus Go
// client, plus podkit's own.
//
// Where a metric means what the kubelet's means, it has the kubelet's name,
// labels and buckets:
//
//   - kubelet_working_pods{lifecycle,config,static}: pod workers by
//     lifecycle (sync, terminating, terminated), by whether config wants the
//     pod (desired, orphan, runtime_only) and by whether it is static
//     ("true", "", or "unknown" for runtime-only pods), read from the pod
//     workers at each scrape;
//   - kubelet_pod_worker_duration_seconds{operation_type}: the time a pod
//     worker took to sync one pod, by update type (create, update, sync),
//     "kill" for stopping a pod's containers and "terminated" for the
//     cleanup after. Measured from the hook's start: the wait before it is
//     podkit_pod_worker_dispatch_latency_seconds;
//   - kubelet_pod_start_duration_seconds: from the node first seeing a pod
//     (its kubernetes.io/config.seen annotation) to the first sync after
//     which the pod runs;
//   - kubelet_running_pods and kubelet_running_containers{container_state}:
//     what the runtime runs, at each scrape;
//   - kubelet_node_name{node}: always 1.
//
// podkit's own engine metrics (podworker.MetricsProvider) are under
// podkit_pod_worker_: hook_duration_seconds{hook}, dispatch_latency_seconds,
// retries_total{hook}, panics_total, and podkit_pod_workers{stage}.
// The Go runtime's and the process's collectors (go_*, process_*) are
// registered too.
//
// # Usage
//
// Create a Metrics with New; give Provider to podworker.Options.Metrics;
// wrap the syncer with WrapSyncer; once the pod workers and the pod store
// exist, call ObserveWorkers (and ObserveRuntime); serve Registry, for
// example on the kubelet API's /metrics (package kubeletserver).
//
// # Concurrency
//
// Every method is safe for concurrent use. Collectors read their sources
// on the scraping goroutine.
package nodemetrics
