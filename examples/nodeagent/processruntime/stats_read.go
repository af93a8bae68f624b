package processruntime

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The readers of stats.go: cgroup files and /proc, each returning nil
// when what it reads is not there or cannot be parsed.

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture.
const clockTicks = 100

// cgroupV2CPU reads usage_usec of dir's cpu.stat.
func (r *Runtime) cgroupV2CPU(dir string) *CPUStats {
	v, ok := keyedValue(filepath.Join(dir, "cpu.stat"), "usage_usec")
	if !ok {
		return nil
	}
	return &CPUStats{Time: r.clock.Now(), UsageCoreNanoSeconds: v * 1000}
}

// cgroupV2Memory reads dir's memory.current less memory.stat's
// inactive_file (there only when the memory controller is enabled).
func (r *Runtime) cgroupV2Memory(dir string) *MemoryStats {
	usage, ok := fileValue(filepath.Join(dir, "memory.current"))
	if !ok {
		return nil
	}
	inactive, _ := keyedValue(filepath.Join(dir, "memory.stat"), "inactive_file")
	return workingSet(r, usage, inactive)
}

// cgroupV1CPU reads dir's cpuacct.usage (nanoseconds).
func (r *Runtime) cgroupV1CPU(dir string) *CPUStats {
	v, ok := fileValue(filepath.Join(dir, "cpuacct.usage"))
	if !ok {
		return nil
	}
	return &CPUStats{Time: r.clock.Now(), UsageCoreNanoSeconds: v}
}

// cgroupV1Memory reads dir's memory.usage_in_bytes less memory.stat's
// total_inactive_file.
func (r *Runtime) cgroupV1Memory(dir string) *MemoryStats {
	usage, ok := fileValue(filepath.Join(dir, "memory.usage_in_bytes"))
	if !ok {
		return nil
	}
	inactive, _ := keyedValue(filepath.Join(dir, "memory.stat"), "total_inactive_file")
	return workingSet(r, usage, inactive)
}

func workingSet(r *Runtime, usage, inactive uint64) *MemoryStats {
	ws := uint64(0)
	if usage > inactive {
		ws = usage - inactive
	}
	return &MemoryStats{Time: r.clock.Now(), WorkingSetBytes: ws, UsageBytes: &usage}
}

// cgroupProcs lists the processes of the cgroup v2 dir.
func cgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// procsCPU sums utime, stime, cutime and cstime of the processes that
// still exist; nil when none does.
func (r *Runtime) procsCPU(pids []int) *CPUStats {
	var ticks uint64
	found := false
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		end := bytes.LastIndexByte(b, ')')
		if end < 0 || end+2 > len(b) {
			continue
		}
		// Field 3 (state) is rest[0]: utime..cstime are fields 14 to 17.
		rest := strings.Fields(string(b[end+2:]))
		if len(rest) < 15 {
			continue
		}
		for _, f := range rest[11:15] {
			v, err := strconv.ParseInt(f, 10, 64)
			if err == nil && v > 0 {
				ticks += uint64(v)
			}
		}
		found = true
	}
	if !found {
		return nil
	}
	return &CPUStats{Time: r.clock.Now(), UsageCoreNanoSeconds: ticks * (1e9 / clockTicks)}
}

// procsMemory sums the Pss of the processes that still exist (their
// resident memory, pages shared among them counted once in all); nil when
// none could be read.
func (r *Runtime) procsMemory(pids []int) *MemoryStats {
	var kb uint64
	found := false
	for _, pid := range pids {
		v, ok := keyedValue("/proc/"+strconv.Itoa(pid)+"/smaps_rollup", "Pss:")
		if !ok {
			continue
		}
		kb += v
		found = true
	}
	if !found {
		return nil
	}
	return &MemoryStats{Time: r.clock.Now(), WorkingSetBytes: kb << 10}
}

// netnsTraffic reads /proc/<pid>/net/dev: the interfaces of pid's
// network namespace, but lo.
func (r *Runtime) netnsTraffic(pid int) *NetworkStats {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/net/dev")
	if err != nil {
		return nil
	}
	defer f.Close()
	ns := &NetworkStats{Time: r.clock.Now()}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, counters, ok := strings.Cut(sc.Text(), ":")
		name = strings.TrimSpace(name)
		if !ok || name == "lo" {
			continue
		}
		// rx: bytes packets errs drop fifo frame compressed multicast; tx:
		// bytes packets errs ...
		v := strings.Fields(counters)
		if len(v) < 16 {
			continue
		}
		n := func(i int) uint64 { x, _ := strconv.ParseUint(v[i], 10, 64); return x }
		ns.Interfaces = append(ns.Interfaces, InterfaceStats{Name: name, RxBytes: n(0), RxErrors: n(2), TxBytes: n(8), TxErrors: n(10)})
	}
	if sc.Err() != nil {
		return nil
	}
	return ns
}

// fileValue reads a file holding one unsigned number.
func fileValue(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// keyedValue reads the number after key in a file of "key value" lines
// (cpu.stat, memory.stat, smaps_rollup).
func keyedValue(path, key string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == key {
			v, err := strconv.ParseUint(f[1], 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}
