package kubeletserver

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/podkit/podkit/examples/cri"
)

// CRIPodStatsLister is what a CRI runtime's syncer measures of its pods
// (*cri.Syncer, with cri.Options.Stats set).
type CRIPodStatsLister interface {
	PodStats(ctx context.Context) ([]cri.PodStats, error)
}

// CRIStats is the StatsProvider of a CRI runtime: the figures of CRI
// ListContainerStats and ListPodSandboxStats, as the kubelet's CRI stats
// provider reports them. A pod's CPU and memory are its sandbox's (its
// cgroup) where the runtime measures sandboxes, else the sum of its
// containers'. A container's start time is its creation, as on the
// kubelet.
func CRIStats(l CRIPodStatsLister) StatsProvider {
	return StatsProviderFunc(func(ctx context.Context) ([]statsapi.PodStats, error) {
		pods, err := l.PodStats(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]statsapi.PodStats, len(pods))
		for i, p := range pods {
			out[i] = podStatsFromCRI(p)
		}
		return out, nil
	})
}

func podStatsFromCRI(p cri.PodStats) statsapi.PodStats {
	out := statsapi.PodStats{
		PodRef:     statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
		StartTime:  metav1.NewTime(time.Unix(0, p.SandboxCreatedAt)),
		Containers: make([]statsapi.ContainerStats, 0, len(p.Containers)),
	}
	for _, c := range p.Containers {
		out.Containers = append(out.Containers, statsapi.ContainerStats{
			Name:      c.Name,
			StartTime: metav1.NewTime(time.Unix(0, c.CreatedAt)),
			CPU:       cpuFromCRI(c.Stats.GetCpu()),
			Memory:    memoryFromCRI(c.Stats.GetMemory()),
			Rootfs:    fsFromCRI(c.Stats.GetWritableLayer()),
		})
	}
	if linux := p.Sandbox.GetLinux(); linux != nil {
		out.CPU = cpuFromCRI(linux.GetCpu())
		out.Memory = memoryFromCRI(linux.GetMemory())
	}
	if out.CPU == nil {
		out.CPU = sumCPU(out.Containers)
	}
	if out.Memory == nil {
		out.Memory = sumMemory(out.Containers)
	}
	return out
}

func cpuFromCRI(c *runtimeapi.CpuUsage) *statsapi.CPUStats {
	if c == nil {
		return nil
	}
	return &statsapi.CPUStats{
		Time:                 metav1.NewTime(time.Unix(0, c.GetTimestamp())),
		UsageCoreNanoSeconds: uint64Value(c.GetUsageCoreNanoSeconds()),
		UsageNanoCores:       uint64Value(c.GetUsageNanoCores()),
	}
}

func memoryFromCRI(m *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	return &statsapi.MemoryStats{
		Time:            metav1.NewTime(time.Unix(0, m.GetTimestamp())),
		AvailableBytes:  uint64Value(m.GetAvailableBytes()),
		UsageBytes:      uint64Value(m.GetUsageBytes()),
		WorkingSetBytes: uint64Value(m.GetWorkingSetBytes()),
		RSSBytes:        uint64Value(m.GetRssBytes()),
		PageFaults:      uint64Value(m.GetPageFaults()),
		MajorPageFaults: uint64Value(m.GetMajorPageFaults()),
	}
}

func fsFromCRI(f *runtimeapi.FilesystemUsage) *statsapi.FsStats {
	if f == nil {
		return nil
	}
	return &statsapi.FsStats{
		Time:       metav1.NewTime(time.Unix(0, f.GetTimestamp())),
		UsedBytes:  uint64Value(f.GetUsedBytes()),
		InodesUsed: uint64Value(f.GetInodesUsed()),
	}
}

func uint64Value(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	x := v.GetValue()
	return &x
}

// sumCPU is the containers' CPU together, or nil when none measured it.
func sumCPU(cs []statsapi.ContainerStats) *statsapi.CPUStats {
	var sum *statsapi.CPUStats
	for _, c := range cs {
		if c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil {
			continue
		}
		if sum == nil {
			sum = &statsapi.CPUStats{Time: c.CPU.Time, UsageCoreNanoSeconds: new(uint64)}
		}
		*sum.UsageCoreNanoSeconds += *c.CPU.UsageCoreNanoSeconds
		if c.CPU.Time.After(sum.Time.Time) {
			sum.Time = c.CPU.Time
		}
	}
	return sum
}

// sumMemory is the containers' working sets together, or nil when none
// measured it.
func sumMemory(cs []statsapi.ContainerStats) *statsapi.MemoryStats {
	var sum *statsapi.MemoryStats
	for _, c := range cs {
		if c.Memory == nil || c.Memory.WorkingSetBytes == nil {
			continue
		}
		if sum == nil {
			sum = &statsapi.MemoryStats{Time: c.Memory.Time, WorkingSetBytes: new(uint64)}
		}
		*sum.WorkingSetBytes += *c.Memory.WorkingSetBytes
		if c.Memory.Time.After(sum.Time.Time) {
			sum.Time = c.Memory.Time
		}
	}
	return sum
}
