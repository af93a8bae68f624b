package nodemetrics

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/podworker"
)

// podStartBuckets are the kubelet's buckets for
// kubelet_pod_start_duration_seconds, in seconds.
var podStartBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// Options configure a Metrics. NodeName is required.
type Options struct {
	// NodeName labels kubelet_node_name.
	NodeName string
	// Clock times the pod workers' hooks and pod starts. Defaults to the
	// real clock.
	Clock clock.PassiveClock
}

// Metrics are the Prometheus metrics of one node agent, in a registry of
// their own. Create them with New.
type Metrics struct {
	registry *prometheus.Registry
	clock    clock.PassiveClock

	workerDuration *prometheus.HistogramVec
	podStart       prometheus.Histogram

	hookDuration *prometheus.HistogramVec
	dispatch     prometheus.Histogram
	retries      *prometheus.CounterVec
	panics       prometheus.Counter
	slowHooks    prometheus.Counter
	stages       *prometheus.GaugeVec

	mu sync.Mutex
	// observed is set once ObserveWorkers or ObserveRuntime registered
	// their collector.
	observedWorkers, observedRuntime bool
}

// New returns the metrics of the node opts.NodeName, registered in a new
// registry with the Go and process collectors.
func New(opts Options) (*Metrics, error) {
	if opts.NodeName == "" {
		return nil, errors.New("nodemetrics: Options.NodeName is required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		clock:    opts.Clock,
		workerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubelet_pod_worker_duration_seconds",
			Help:    "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation_type"}),
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubelet_pod_start_duration_seconds",
			Help:    "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			Buckets: podStartBuckets,
		}),
		hookDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "podkit_pod_worker_hook_duration_seconds",
			Help:    "Duration in seconds of the pod workers' hooks, by hook: SyncPod, SyncTerminatingPod, SyncTerminatingRuntimePod, SyncTerminatedPod.",
			Buckets: prometheus.DefBuckets,
		}, []string{"hook"}),
		dispatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "podkit_pod_worker_dispatch_latency_seconds",
			Help:    "Time in seconds from a pod update to the start of the hook that acted on it.",
			Buckets: prometheus.DefBuckets,
		}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podkit_pod_worker_retries_total",
			Help: "Hooks that failed and were scheduled for a retry, by hook.",
		}, []string{"hook"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "podkit_pod_worker_panics_total",
			Help: "Hooks that panicked.",
		}),
		slowHooks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "podkit_pod_worker_slow_hooks_total",
			Help: "Hook calls still running podworker.Options.SlowHookWarning after their context was cancelled.",
		}),
		stages: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "podkit_pod_workers",
			Help: "Pod workers by stage (not-started, syncing, termination-requested, terminating, terminated, finished).",
		}, []string{"stage"}),
	}
	nodeName := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelet_node_name",
		Help: "The node's name. The count is always 1.",
	}, []string{"node"})
	nodeName.WithLabelValues(opts.NodeName).Set(1)
	for _, c := range []prometheus.Collector{
		m.workerDuration, m.podStart, m.hookDuration, m.dispatch, m.retries, m.panics, m.slowHooks, m.stages, nodeName,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := m.registry.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Registry returns the registry holding every metric, to serve (it is a
// prometheus.Gatherer) or to register more collectors in.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Provider returns the podworker.MetricsProvider of podkit's engine
// metrics. Give it to podworker.Options.Metrics of one PodWorkers.
func (m *Metrics) Provider() podworker.MetricsProvider { return provider{m} }

type provider struct{ m *Metrics }

func (p provider) NewSyncDurationMetric(hook podworker.Hook) podworker.HistogramMetric {
	return p.m.hookDuration.WithLabelValues(hook.String())
}

func (p provider) NewDispatchLatencyMetric() podworker.HistogramMetric { return p.m.dispatch }

func (p provider) NewRetriesMetric(hook podworker.Hook) podworker.CounterMetric {
	return p.m.retries.WithLabelValues(hook.String())
}

func (p provider) NewPanicsMetric() podworker.CounterMetric { return p.m.panics }

func (p provider) NewSlowHooksMetric() podworker.CounterMetric { return p.m.slowHooks }

func (p provider) NewPodsMetric(stage podworker.Stage) podworker.GaugeMetric {
	return p.m.stages.WithLabelValues(stage.String())
}

// ObserveWorkers exports kubelet_working_pods, read at each scrape from
// workers (usually PodWorkers.Pods) and desired, which says whether config
// wants a UID (usually the pod store's GetPodByUID). It may be called once;
// a second call is an error.
func (m *Metrics) ObserveWorkers(workers func() []podworker.PodInfo, desired func(types.UID) bool) error {
	if workers == nil || desired == nil {
		return errors.New("nodemetrics: ObserveWorkers needs both functions")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.observedWorkers {
		return errors.New("nodemetrics: ObserveWorkers called twice")
	}
	if err := m.registry.Register(&workingPods{workers: workers, desired: desired}); err != nil {
		return err
	}
	m.observedWorkers = true
	return nil
}

// ObserveRuntime exports kubelet_running_pods and
// kubelet_running_containers, read at each scrape from count. It may be
// called once; a second call is an error.
func (m *Metrics) ObserveRuntime(count func() RuntimeCounts) error {
	if count == nil {
		return errors.New("nodemetrics: ObserveRuntime needs a function")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.observedRuntime {
		return errors.New("nodemetrics: ObserveRuntime called twice")
	}
	if err := m.registry.Register(&runtimeCollector{count: count}); err != nil {
		return err
	}
	m.observedRuntime = true
	return nil
}
