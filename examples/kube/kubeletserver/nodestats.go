package kubeletserver

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// userHZ is the unit of the CPU times in /proc/stat (USER_HZ, which Linux
// fixes at 100 for user space on every architecture it runs on).
const userHZ = 100

// nodeStats reads the node's own CPU and memory figures from /proc (the
// kubelet reads the root cgroup through cAdvisor; on a node without a
// cgroup of its own for everything, /proc is the whole machine, which is
// what the root cgroup counts too):
//   - CPU: UsageCoreNanoSeconds is the CPU time of /proc/stat's first
//     line, all but idle and iowait; UsageNanoCores its rate since the
//     previous read (absent on the first);
//   - memory: UsageBytes is MemTotal-MemFree of /proc/meminfo,
//     WorkingSetBytes that less Inactive(file), AvailableBytes
//     MemAvailable;
//   - StartTime is the boot time (btime of /proc/stat).
//
// Where /proc cannot be read (not Linux), the figures are absent. Safe
// for concurrent use.
type nodeStats struct {
	proc string // "/proc"; tests point it elsewhere

	mu sync.Mutex
	// last is the previous CPU reading, for the rate.
	last struct {
		at    time.Time
		usage uint64
		ok    bool
	}
}

func newNodeStats() *nodeStats { return &nodeStats{proc: "/proc"} }

// read returns the node's stats now.
func (n *nodeStats) read(nodeName string) statsapi.NodeStats {
	out := statsapi.NodeStats{NodeName: nodeName}
	now := time.Now()
	if stat, err := os.ReadFile(n.proc + "/stat"); err == nil {
		if usage, boot, err := parseProcStat(stat); err == nil {
			out.StartTime = metav1.NewTime(boot)
			out.CPU = &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: &usage}
			n.mu.Lock()
			if n.last.ok && now.After(n.last.at) && usage >= n.last.usage {
				rate := uint64(float64(usage-n.last.usage) / now.Sub(n.last.at).Seconds())
				out.CPU.UsageNanoCores = &rate
			}
			n.last.at, n.last.usage, n.last.ok = now, usage, true
			n.mu.Unlock()
		}
	}
	if meminfo, err := os.ReadFile(n.proc + "/meminfo"); err == nil {
		if m, err := parseMeminfo(meminfo); err == nil {
			out.Memory = m
			m.Time = metav1.NewTime(now)
		}
	}
	return out
}

// parseProcStat returns the CPU time used (nanoseconds) and the boot time
// of /proc/stat.
func parseProcStat(b []byte) (usage uint64, boot time.Time, err error) {
	var haveCPU, haveBoot bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 5 && f[0] == "cpu":
			// user nice system idle iowait irq softirq steal (guest
			// time is counted in user already).
			var ticks uint64
			for i, v := range f[1:min(len(f), 9)] {
				t, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return 0, time.Time{}, fmt.Errorf("kubeletserver: /proc/stat cpu field %d: %w", i+1, err)
				}
				if i != 3 && i != 4 { // idle, iowait
					ticks += t
				}
			}
			usage, haveCPU = ticks*uint64(time.Second/userHZ), true
		case len(f) == 2 && f[0] == "btime":
			s, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, time.Time{}, fmt.Errorf("kubeletserver: /proc/stat btime: %w", err)
			}
			boot, haveBoot = time.Unix(s, 0), true
		}
	}
	if !haveCPU || !haveBoot {
		return 0, time.Time{}, fmt.Errorf("kubeletserver: /proc/stat has no cpu or btime line")
	}
	return usage, boot, nil
}

// parseMeminfo returns the node's memory figures from /proc/meminfo.
func parseMeminfo(b []byte) (*statsapi.MemoryStats, error) {
	kb := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			kb[name] = v
		}
	}
	total, okT := kb["MemTotal"]
	free, okF := kb["MemFree"]
	if !okT || !okF || free > total {
		return nil, fmt.Errorf("kubeletserver: /proc/meminfo lacks MemTotal or MemFree")
	}
	usage := (total - free) << 10
	ws := usage
	if inactive := kb["Inactive(file)"] << 10; inactive < ws {
		ws -= inactive
	} else {
		ws = 0
	}
	m := &statsapi.MemoryStats{UsageBytes: &usage, WorkingSetBytes: &ws}
	if avail, ok := kb["MemAvailable"]; ok {
		a := avail << 10
		m.AvailableBytes = &a
	}
	return m, nil
}
