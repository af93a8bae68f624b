package nodemetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

var (
	workingPodsDesc = prometheus.NewDesc("kubelet_working_pods",
		"Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only (also orphaned), and whether the pod is static. An orphaned pod has been removed from local configuration or force deleted in the API and consumes resources that are not otherwise visible.",
		[]string{"lifecycle", "config", "static"}, nil)
	runningPodsDesc = prometheus.NewDesc("kubelet_running_pods",
		"Number of pods that have a running pod sandbox", nil, nil)
	runningContainersDesc = prometheus.NewDesc("kubelet_running_containers",
		"Number of containers currently running", []string{"container_state"}, nil)
)

// workingPods collects kubelet_working_pods from the pod workers.
type workingPods struct {
	workers func() []podworker.PodInfo
	desired func(types.UID) bool
}

func (c *workingPods) Describe(ch chan<- *prometheus.Desc) { ch <- workingPodsDesc }

// workingKey is one series of kubelet_working_pods.
type workingKey struct{ lifecycle, config, static string }

// Collect counts the workers by lifecycle, config and static, and sends
// every series the kubelet sends, zeros included, so a series does not
// vanish when its count drops to zero.
func (c *workingPods) Collect(ch chan<- prometheus.Metric) {
	counts := map[workingKey]int{}
	for _, info := range c.workers() {
		k := workingKey{lifecycle: kubeletWorkType(info.Stage)}
		switch {
		case info.RuntimeOnly:
			k.config, k.static = "runtime_only", "unknown"
		case c.desired(info.UID):
			k.config = "desired"
		default:
			k.config = "orphan"
		}
		if !info.RuntimeOnly && info.Static {
			k.static = "true"
		}
		counts[k]++
	}
	for _, state := range kubeletWorkTypes {
		for _, k := range []workingKey{
			{config: "desired", static: "true"}, {config: "desired"},
			{config: "orphan", static: "true"}, {config: "orphan"},
			{config: "runtime_only", static: "unknown"},
		} {
			k.lifecycle = state
			ch <- prometheus.MustNewConstMetric(workingPodsDesc, prometheus.GaugeValue, float64(counts[k]),
				k.lifecycle, k.config, k.static)
		}
	}
}

// kubeletWorkTypes are the values of kubelet_working_pods' lifecycle
// label: the kubelet's three work types.
var kubeletWorkTypes = []string{"sync", "terminating", "terminated"}

// kubeletWorkType is the kubelet's work type of a worker in stage s (see
// podworker.Stage): "sync" until termination is requested, "terminating"
// until no container runs, then "terminated".
func kubeletWorkType(s podworker.Stage) string {
	switch {
	case s >= podworker.StageTerminated:
		return "terminated"
	case s >= podworker.StageTerminationRequested:
		return "terminating"
	}
	return "sync"
}

// RuntimeCounts is what a runtime runs now: pods with a running
// container, and containers by state (the kubelet's container_state
// values: "running", "exited", "created", "unknown").
type RuntimeCounts struct {
	Pods       int
	Containers map[string]int
}

// runtimeCollector collects kubelet_running_pods and
// kubelet_running_containers.
type runtimeCollector struct {
	count func() RuntimeCounts
}

func (c *runtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runningPodsDesc
	ch <- runningContainersDesc
}

func (c *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.count()
	ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(counts.Pods))
	for state, n := range counts.Containers {
		ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(n), state)
	}
}
