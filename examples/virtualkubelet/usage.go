package virtualkubelet

import (
	"context"
	"fmt"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// runningUsage is one pod GetPods lists, with the backend's figures for
// it (nil when the backend has none).
type runningUsage struct {
	namespace, name string
	uid             types.UID
	startTime       time.Time
	containers      []containerStart
	usage           *PodUsage
}

type containerStart struct {
	name    string
	started time.Time
}

// usage returns the running pods (as GetPods lists them) with the
// backend's usage figures, ordered by namespace, name and UID, and when
// they were taken (the newest figure; now when there is none).
func (p *Provider) usage(ctx context.Context) ([]runningUsage, time.Time, error) {
	byUID := map[types.UID]*PodUsage{}
	if p.metrics != nil {
		figures, err := p.metrics.Usage(ctx)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("virtualkubelet: reading the backend's resource usage: %w", err)
		}
		for i := range figures {
			byUID[figures[i].UID] = &figures[i]
		}
	}
	pods, err := p.GetPods(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	at := time.Time{}
	out := make([]runningUsage, 0, len(pods))
	for _, pod := range pods {
		ru := runningUsage{namespace: pod.Namespace, name: pod.Name, uid: pod.UID, usage: byUID[pod.UID]}
		if pod.Status.StartTime != nil {
			ru.startTime = pod.Status.StartTime.Time
		}
		for _, cs := range pod.Status.ContainerStatuses {
			c := containerStart{name: cs.Name}
			switch {
			case cs.State.Running != nil:
				c.started = cs.State.Running.StartedAt.Time
			case cs.State.Terminated != nil:
				c.started = cs.State.Terminated.StartedAt.Time
			}
			ru.containers = append(ru.containers, c)
		}
		if len(ru.containers) == 0 {
			for _, c := range pod.Spec.Containers {
				ru.containers = append(ru.containers, containerStart{name: c.Name})
			}
		}
		if ru.usage != nil && ru.usage.Time.After(at) {
			at = ru.usage.Time
		}
		out = append(out, ru)
	}
	if at.IsZero() {
		at = p.opts.Clock.Now()
	}
	return out, at, nil
}

// find returns the figures of the named container, or nil.
func (u *PodUsage) find(name string) *ContainerUsage {
	if u == nil {
		return nil
	}
	for i := range u.Containers {
		if u.Containers[i].Name == name {
			return &u.Containers[i]
		}
	}
	return nil
}

// GetStatsSummary returns the kubelet's stats summary (the Summary API,
// served as /stats/summary) for the node and the pods GetPods lists, with
// CPU and memory figures from the backend (BackendMetrics): per container,
// summed per pod, and summed over the pods for the node. A pod or
// container the backend has no figures for is listed without CPU and
// memory stats. Without BackendMetrics, no figures at all. The node's
// start time is when Run started. It fails when the backend's Usage does.
// Called from virtual-kubelet's HTTP handlers, any goroutine.
func (p *Provider) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	pods, at, err := p.usage(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	started := p.startedAt
	p.mu.Unlock()
	ts := metav1.NewTime(at)
	sum := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: p.opts.NodeName, StartTime: metav1.NewTime(started)}}
	var nodeCPU, nodeCores, nodeMem uint64
	nodeFigures := false
	for _, ru := range pods {
		ps := statsv1alpha1.PodStats{
			PodRef:     statsv1alpha1.PodReference{Name: ru.name, Namespace: ru.namespace, UID: string(ru.uid)},
			StartTime:  metav1.NewTime(ru.startTime),
			Containers: []statsv1alpha1.ContainerStats{},
		}
		var podCPU, podCores, podMem uint64
		podFigures := false
		for _, c := range ru.containers {
			cs := statsv1alpha1.ContainerStats{Name: c.name, StartTime: metav1.NewTime(c.started)}
			if cu := ru.usage.find(c.name); cu != nil {
				cs.CPU, cs.Memory = cpuStats(ts, uint64(cu.CPU), cu.NanoCores), memoryStats(ts, cu.MemoryWorkingSet)
				podCPU += uint64(cu.CPU)
				podCores += cu.NanoCores
				podMem += cu.MemoryWorkingSet
				podFigures = true
			}
			ps.Containers = append(ps.Containers, cs)
		}
		if podFigures {
			ps.CPU, ps.Memory = cpuStats(ts, podCPU, podCores), memoryStats(ts, podMem)
			nodeCPU += podCPU
			nodeCores += podCores
			nodeMem += podMem
			nodeFigures = true
		}
		sum.Pods = append(sum.Pods, ps)
	}
	if nodeFigures {
		sum.Node.CPU, sum.Node.Memory = cpuStats(ts, nodeCPU, nodeCores), memoryStats(ts, nodeMem)
	}
	return sum, nil
}

func cpuStats(at metav1.Time, coreNanoSeconds, nanoCores uint64) *statsv1alpha1.CPUStats {
	return &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: &coreNanoSeconds, UsageNanoCores: &nanoCores}
}

func memoryStats(at metav1.Time, workingSet uint64) *statsv1alpha1.MemoryStats {
	return &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: &workingSet, UsageBytes: &workingSet}
}

// Names of the resource metrics GetMetricsResource returns: the kubelet's
// (its /metrics/resource endpoint), which metrics-server reads.
const (
	MetricNodeCPU             = "node_cpu_usage_seconds_total"
	MetricNodeMemory          = "node_memory_working_set_bytes"
	MetricPodCPU              = "pod_cpu_usage_seconds_total"
	MetricPodMemory           = "pod_memory_working_set_bytes"
	MetricContainerCPU        = "container_cpu_usage_seconds_total"
	MetricContainerMemory     = "container_memory_working_set_bytes"
	MetricContainerStartTime  = "container_start_time_seconds"
	MetricResourceScrapeError = "resource_scrape_error"
)

// GetMetricsResource returns the kubelet's resource metrics (served as
// /metrics/resource, in Prometheus' text format) from the same figures as
// GetStatsSummary: CPU seconds and memory working set per node, per pod
// (labels namespace, pod) and per container (labels namespace, pod,
// container, in that order), each sample stamped with when the backend
// took it, the containers' start times, and resource_scrape_error (0, or
// 1 when the backend's Usage failed, the other families then being
// empty). Only pods and containers the backend has figures for have
// samples. Called from virtual-kubelet's HTTP handlers, any goroutine.
func (p *Provider) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	scrapeError := family(MetricResourceScrapeError, "1 if there was an error while getting container metrics, 0 otherwise", dto.MetricType_GAUGE)
	pods, at, err := p.usage(ctx)
	if err != nil {
		p.opts.Logger.Error(err, "Serving resource metrics")
		scrapeError.Metric = append(scrapeError.Metric, gauge(nil, 0, 1))
		return []*dto.MetricFamily{scrapeError}, nil
	}
	scrapeError.Metric = append(scrapeError.Metric, gauge(nil, 0, 0))
	nodeCPU := family(MetricNodeCPU, "Cumulative cpu time consumed by the node in core-seconds", dto.MetricType_COUNTER)
	nodeMem := family(MetricNodeMemory, "Current working set of the node in bytes", dto.MetricType_GAUGE)
	podCPU := family(MetricPodCPU, "Cumulative cpu time consumed by the pod in core-seconds", dto.MetricType_COUNTER)
	podMem := family(MetricPodMemory, "Current working set of the pod in bytes", dto.MetricType_GAUGE)
	ctrCPU := family(MetricContainerCPU, "Cumulative cpu time consumed by the container in core-seconds", dto.MetricType_COUNTER)
	ctrMem := family(MetricContainerMemory, "Current working set of the container in bytes", dto.MetricType_GAUGE)
	ctrStart := family(MetricContainerStartTime, "Start time of the container since unix epoch in seconds", dto.MetricType_GAUGE)
	ms := at.UnixMilli()
	var nodeSeconds, nodeBytes float64
	for _, ru := range pods {
		if ru.usage == nil {
			continue
		}
		ts := ru.usage.Time.UnixMilli()
		var podSeconds, podBytes float64
		for _, c := range ru.containers {
			cu := ru.usage.find(c.name)
			if cu == nil {
				continue
			}
			labels := labelPairs("namespace", ru.namespace, "pod", ru.name, "container", c.name)
			ctrCPU.Metric = append(ctrCPU.Metric, counter(labels, ts, cu.CPU.Seconds()))
			ctrMem.Metric = append(ctrMem.Metric, gauge(labels, ts, float64(cu.MemoryWorkingSet)))
			if !c.started.IsZero() {
				ctrStart.Metric = append(ctrStart.Metric, gauge(labels, ts, float64(c.started.UnixNano())/1e9))
			}
			podSeconds += cu.CPU.Seconds()
			podBytes += float64(cu.MemoryWorkingSet)
		}
		labels := labelPairs("namespace", ru.namespace, "pod", ru.name)
		podCPU.Metric = append(podCPU.Metric, counter(labels, ts, podSeconds))
		podMem.Metric = append(podMem.Metric, gauge(labels, ts, podBytes))
		nodeSeconds += podSeconds
		nodeBytes += podBytes
	}
	nodeCPU.Metric = append(nodeCPU.Metric, counter(nil, ms, nodeSeconds))
	nodeMem.Metric = append(nodeMem.Metric, gauge(nil, ms, nodeBytes))
	out := []*dto.MetricFamily{ctrCPU, ctrMem, ctrStart, nodeCPU, nodeMem, podCPU, podMem, scrapeError}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

func family(name, help string, typ dto.MetricType) *dto.MetricFamily {
	return &dto.MetricFamily{Name: &name, Help: &help, Type: &typ}
}

// labelPairs makes label pairs of name, value, name, value... in the
// order given.
func labelPairs(nameValues ...string) []*dto.LabelPair {
	out := make([]*dto.LabelPair, 0, len(nameValues)/2)
	for i := 0; i+1 < len(nameValues); i += 2 {
		out = append(out, &dto.LabelPair{Name: &nameValues[i], Value: &nameValues[i+1]})
	}
	return out
}

func counter(labels []*dto.LabelPair, ms int64, v float64) *dto.Metric {
	m := &dto.Metric{Label: labels, Counter: &dto.Counter{Value: &v}}
	if ms != 0 {
		m.TimestampMs = &ms
	}
	return m
}

func gauge(labels []*dto.LabelPair, ms int64, v float64) *dto.Metric {
	m := &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: &v}}
	if ms != 0 {
		m.TimestampMs = &ms
	}
	return m
}
