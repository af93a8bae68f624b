package processruntime

import (
	"context"
	"path/filepath"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// This file measures the pods that run, for the kubelet API's
// /stats/summary and /metrics/resource (kubectl top), and lists them for
// /runningpods. Where the figures come from (see "Stats" in the package
// doc):
//
//   - CPU time: a cgroup v2's cpu.stat (usage_usec; every v2 cgroup has it,
//     whatever its controllers), of the pod's cgroup and of each container
//     process's; else, for a pod, cgroup v1's cpuacct.usage of its
//     cpuacct cgroup; else the sum of utime and stime (with those of the
//     children they reaped) of the processes, from /proc.
//   - Memory working set: a cgroup's usage less its inactive file pages
//     (v2: memory.current less memory.stat's inactive_file; v1:
//     memory.usage_in_bytes less total_inactive_file), as cAdvisor
//     computes it; else the sum of the processes' proportional set sizes
//     (Pss of /proc/<pid>/smaps_rollup), which counts no page cache they
//     do not map.
//   - Network: the interfaces of the pod's network namespace but lo, from
//     /proc/<init>/net/dev of its sandbox's init; none for a pod in the
//     host's network.
//
// A figure that cannot be read is left out (nil), never reported as zero.

// PodStats is one pod the runtime runs, measured.
type PodStats struct {
	UID       types.UID
	Namespace string
	Name      string
	// StartTime is when the runtime first synced the pod.
	StartTime time.Time
	// CPU and Memory are the pod's whole (its containers, execs and
	// sandbox together); Network its namespace's. Each nil when not
	// measured.
	CPU     *CPUStats
	Memory  *MemoryStats
	Network *NetworkStats
	// Containers are its running containers, by name.
	Containers []ContainerStats
}

// ContainerStats is one running container, measured.
type ContainerStats struct {
	Name string
	// StartTime is when its running process started.
	StartTime time.Time
	CPU       *CPUStats
	Memory    *MemoryStats
}

// CPUStats is CPU time used, cumulative.
type CPUStats struct {
	// Time is when it was measured.
	Time time.Time
	// UsageCoreNanoSeconds is the CPU time used since the start, in
	// nanoseconds of one core.
	UsageCoreNanoSeconds uint64
}

// MemoryStats is memory in use.
type MemoryStats struct {
	// Time is when it was measured.
	Time time.Time
	// WorkingSetBytes is the memory in use that cannot be reclaimed at
	// once (see the file's comment for how each source counts it).
	WorkingSetBytes uint64
	// UsageBytes is the whole usage, page cache included; nil when it was
	// not read from a cgroup.
	UsageBytes *uint64
}

// NetworkStats is the traffic of a pod's network namespace.
type NetworkStats struct {
	// Time is when it was measured.
	Time time.Time
	// Interfaces are the namespace's, but lo, by name.
	Interfaces []InterfaceStats
}

// InterfaceStats is one network interface's traffic, cumulative.
type InterfaceStats struct {
	Name                                 string
	RxBytes, RxErrors, TxBytes, TxErrors uint64
}

// RunningPod is a pod with a running container, as RunningPods lists it.
type RunningPod struct {
	UID       types.UID
	Namespace string
	Name      string
	// Containers are its running containers, by name.
	Containers []RunningContainer
}

// RunningContainer is a running container of a RunningPod.
type RunningContainer struct {
	Name  string
	Image string
	// ID is its ContainerID (changes with every start).
	ID string
}

// RunningPods lists the pods of which a container process runs now, by
// UID, each with those containers by name: what the runtime knows runs,
// for the kubelet API's /runningpods (an agent narrows it with its
// engine's window: a pod being torn down may still have a process). The
// slice is the caller's. Safe for concurrent use.
func (r *Runtime) RunningPods() []RunningPod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []RunningPod
	for _, p := range r.pods {
		rp := RunningPod{UID: p.uid, Namespace: p.namespace, Name: p.name}
		for _, c := range p.containers {
			if c.proc != nil {
				rp.Containers = append(rp.Containers, RunningContainer{Name: c.rec.Name, Image: c.image, ID: c.proc.id})
			}
		}
		if len(rp.Containers) > 0 {
			sort.Slice(rp.Containers, func(i, j int) bool { return rp.Containers[i].Name < rp.Containers[j].Name })
			out = append(out, rp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// statsTarget is what PodStats reads for one pod, taken under the lock.
type statsTarget struct {
	stats PodStats
	// podV2 is the pod's cgroup v2 ("" without); v1 its cgroup v1 per
	// controller.
	podV2 string
	v1    map[string]string
	// initPID is its sandbox's init (0: none runs); netns says it has a
	// network namespace of its own.
	initPID int
	netns   bool
	// containers are its running containers' processes.
	containers []statsContainer
}

type statsContainer struct {
	name    string
	started time.Time
	pid     int
	cgroup  string
}

// PodStats measures each pod the runtime runs (with a container process
// running), by UID, and each running container of it, by name. It reads
// the pods' cgroups, and /proc where a figure has no cgroup; a pod whose
// figures could not be read at all still comes with its identity and
// start time. It fails only when ctx has ended. The slice is the
// caller's. Safe for concurrent use; it reads files only, without the
// runtime's lock, and scans the process table once when some container
// has no cgroup of its own.
func (r *Runtime) PodStats(ctx context.Context) ([]PodStats, error) {
	targets := r.statsTargets()
	var scan map[types.UID]map[string][]int
	for i := range targets {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t := &targets[i]
		if scan == nil && needsScan(t) {
			scan = r.scanContainerProcesses()
		}
		r.measurePod(t, scan[t.stats.UID])
	}
	out := make([]PodStats, len(targets))
	for i := range targets {
		out[i] = targets[i].stats
	}
	return out, nil
}

// statsTargets takes, under the lock, what PodStats needs to read.
func (r *Runtime) statsTargets() []statsTarget {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []statsTarget
	for _, p := range r.pods {
		t := statsTarget{stats: PodStats{UID: p.uid, Namespace: p.namespace, Name: p.name, StartTime: p.startedAt}}
		for _, c := range p.containers {
			if c.proc != nil {
				t.containers = append(t.containers, statsContainer{name: c.rec.Name, started: c.proc.startedAt, pid: c.proc.pid, cgroup: c.proc.cgroup})
			}
		}
		if len(t.containers) == 0 {
			continue
		}
		sort.Slice(t.containers, func(i, j int) bool { return t.containers[i].name < t.containers[j].name })
		if r.cgroups != nil {
			t.podV2 = r.cgroups.podCgroup(p.uid)
		}
		t.v1 = map[string]string{}
		for c, base := range r.limits.v1 {
			t.v1[c] = filepath.Join(base, "pod-"+string(p.uid))
		}
		if p.sb != nil && !p.sb.ended() {
			t.initPID, t.netns = p.sb.rec.PID, p.sb.rec.NetNS
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].stats.UID < out[j].stats.UID })
	return out
}

// needsScan reports whether some running container of t has no cgroup
// listing its processes.
func needsScan(t *statsTarget) bool {
	for _, c := range t.containers {
		if c.cgroup == "" {
			return true
		}
	}
	return false
}

// scanContainerProcesses finds every process of the runtime's pods, by
// pod and container, from their environment.
func (r *Runtime) scanContainerProcesses() map[types.UID]map[string][]int {
	out := map[types.UID]map[string][]int{}
	found, err := ScanProcesses(nil)
	if err != nil {
		r.log.Error(err, "Cannot scan the process table for the pods' stats")
		return out
	}
	for _, p := range found {
		if p.RuntimeID != r.id || p.Container == "" {
			continue
		}
		uid := types.UID(p.PodUID)
		if out[uid] == nil {
			out[uid] = map[string][]int{}
		}
		out[uid][p.Container] = append(out[uid][p.Container], p.PID)
	}
	return out
}

// measurePod fills t.stats from t's cgroups and processes (scanned: the
// processes of t's containers without a cgroup).
func (r *Runtime) measurePod(t *statsTarget, scanned map[string][]int) {
	cpuKnown, memKnown := true, true
	var cpuSum, memSum uint64
	for _, c := range t.containers {
		cs := ContainerStats{Name: c.name, StartTime: c.started}
		pids := scanned[c.name]
		if c.cgroup != "" {
			pids = cgroupProcs(c.cgroup)
			cs.CPU = r.cgroupV2CPU(c.cgroup)
			cs.Memory = r.cgroupV2Memory(c.cgroup)
		}
		if cs.CPU == nil {
			cs.CPU = r.procsCPU(pids)
		}
		if cs.Memory == nil {
			cs.Memory = r.procsMemory(pids)
		}
		if cs.CPU != nil {
			cpuSum += cs.CPU.UsageCoreNanoSeconds
		} else {
			cpuKnown = false
		}
		if cs.Memory != nil {
			memSum += cs.Memory.WorkingSetBytes
		} else {
			memKnown = false
		}
		t.stats.Containers = append(t.stats.Containers, cs)
	}
	s := &t.stats
	if t.podV2 != "" {
		s.CPU, s.Memory = r.cgroupV2CPU(t.podV2), r.cgroupV2Memory(t.podV2)
	}
	if s.CPU == nil && t.v1["cpuacct"] != "" {
		s.CPU = r.cgroupV1CPU(t.v1["cpuacct"])
	}
	if s.Memory == nil && t.v1["memory"] != "" {
		s.Memory = r.cgroupV1Memory(t.v1["memory"])
	}
	// Without a pod cgroup: its containers' and its init's, from /proc.
	if s.CPU == nil && cpuKnown {
		s.CPU = &CPUStats{Time: r.clock.Now(), UsageCoreNanoSeconds: cpuSum}
		if t.initPID > 0 {
			if init := r.procsCPU([]int{t.initPID}); init != nil {
				s.CPU.UsageCoreNanoSeconds += init.UsageCoreNanoSeconds
			}
		}
	}
	if s.Memory == nil && memKnown {
		s.Memory = &MemoryStats{Time: r.clock.Now(), WorkingSetBytes: memSum}
		if t.initPID > 0 {
			if init := r.procsMemory([]int{t.initPID}); init != nil {
				s.Memory.WorkingSetBytes += init.WorkingSetBytes
			}
		}
	}
	if t.initPID > 0 && t.netns {
		s.Network = r.netnsTraffic(t.initPID)
	}
}
