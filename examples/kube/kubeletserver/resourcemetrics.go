package kubeletserver

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// resourceMetricsTimeout bounds one scrape of /metrics/resource.
const resourceMetricsTimeout = 10 * time.Second

// The kubelet's resource metrics (/metrics/resource), by their names and
// labels, which metrics-server and dashboards read.
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"CPU time the node has used since boot, in core-seconds.", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"Memory the node uses, less what it can reclaim at once (inactive file pages), in bytes.", nil, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"CPU time the container has used, in core-seconds.", []string{"container", "pod", "namespace"}, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"Memory the container uses, less inactive file pages, in bytes.", []string{"container", "pod", "namespace"}, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"When the container started, in seconds since the Unix epoch.", []string{"container", "pod", "namespace"}, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"CPU time the pod has used, in core-seconds.", []string{"pod", "namespace"}, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"Memory the pod uses, less inactive file pages, in bytes.", []string{"pod", "namespace"}, nil)
	scrapeErrorDesc = prometheus.NewDesc("scrape_error",
		"1 if reading the pods' stats failed in this scrape, 0 otherwise (the older name of resource_scrape_error).", nil, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"1 if reading the pods' stats failed in this scrape, 0 otherwise.", nil, nil)
)

// resourceCollector exposes the Summary as the kubelet's resource
// metrics, each sample stamped with the time it was measured.
type resourceCollector struct{ s *Server }

func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, containerCPUDesc, containerMemoryDesc,
		containerStartDesc, podCPUDesc, podMemoryDesc, scrapeErrorDesc, resourceScrapeErrorDesc} {
		ch <- d
	}
}

func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), resourceMetricsTimeout)
	defer cancel()
	sum, err := c.s.summary(ctx)
	failed := 0.0
	if err != nil {
		c.s.opts.Logger.Error(err, "Reading the pods' stats for /metrics/resource")
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed)
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, failed)
	cpu(ch, nodeCPUDesc, sum.Node.CPU)
	memory(ch, nodeMemoryDesc, sum.Node.Memory)
	if err != nil {
		return
	}
	for _, p := range sum.Pods {
		for _, ct := range p.Containers {
			labels := []string{ct.Name, p.PodRef.Name, p.PodRef.Namespace}
			if ct.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(containerStartDesc, prometheus.GaugeValue,
					float64(ct.StartTime.UnixNano())/float64(time.Second), labels...)
			}
			cpu(ch, containerCPUDesc, ct.CPU, labels...)
			memory(ch, containerMemoryDesc, ct.Memory, labels...)
		}
		cpu(ch, podCPUDesc, p.CPU, p.PodRef.Name, p.PodRef.Namespace)
		memory(ch, podMemoryDesc, p.Memory, p.PodRef.Name, p.PodRef.Namespace)
	}
}

// cpu sends the cumulative CPU time of s, if measured.
func cpu(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.CPUStats, labels ...string) {
	if s == nil || s.UsageCoreNanoSeconds == nil {
		return
	}
	m := prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(*s.UsageCoreNanoSeconds)/float64(time.Second), labels...)
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time, m)
}

// memory sends the working set of s, if measured.
func memory(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.MemoryStats, labels ...string) {
	if s == nil || s.WorkingSetBytes == nil {
		return
	}
	m := prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*s.WorkingSetBytes), labels...)
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time, m)
}
