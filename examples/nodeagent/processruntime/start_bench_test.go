package processruntime_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/internal/podrangetest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// stageTimes gathers the stage trace of the runtime's sandboxed starts.
type stageTimes struct {
	mu    sync.Mutex
	times map[string][]time.Duration
}

func (s *stageTimes) record(stage string, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.times[stage] = append(s.times[stage], took)
}

// cpuTime is the CPU time of this process, of its reaped children and of
// those that still run (the runtime's sandbox spawner, which lives as long
// as the runtime).
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime) + liveChildrenCPU()
}

// liveChildrenCPU sums the CPU time (user and system, in clock ticks of
// 10 ms) of this process's children that have not been reaped, as each
// thread's children list names them.
func liveChildrenCPU() time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	var ticks uint64
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(b)) {
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue
			}
			// After the command name (which may hold spaces): state is
			// the 3rd field, utime the 14th, stime the 15th.
			i := bytes.LastIndexByte(stat, ')')
			if i < 0 {
				continue
			}
			f := strings.Fields(string(stat[i+1:]))
			if len(f) < 13 {
				continue
			}
			u, _ := strconv.ParseUint(f[11], 10, 64)
			st, _ := strconv.ParseUint(f[12], 10, 64)
			ticks += u + st
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// sandboxBenchBatch is how many pods BenchmarkSandboxedPodStart starts
// at once: -sandbox-bench.batch, 1 by default; 30 is a node's share of the
// kube startup benchmark's 300 pods.
var sandboxBenchBatch = 1

// sandboxBenchStages, -sandbox-bench.stages, makes
// BenchmarkSandboxedPodStart run the stages from cmd/podkit-stages
// (Options.StageExecutable), built for it, rather than from the test
// binary.
var sandboxBenchStages bool

func init() {
	flag.IntVar(&sandboxBenchBatch, "sandbox-bench.batch", 1, "pods BenchmarkSandboxedPodStart starts at once")
	flag.BoolVar(&sandboxBenchStages, "sandbox-bench.stages", false, "BenchmarkSandboxedPodStart runs the stages from cmd/podkit-stages")
}

// BenchmarkSandboxedPodStart measures the first SyncPod of sandboxed
// pods on the pod network (one container, sleep, as the kube startup
// benchmark's pods), -sandbox-bench.batch at once (each SyncPod in a
// goroutine of its own): the wall time of a batch (ns/op), the p50 and
// p99 of one SyncPod, the CPU time of a pod's start and stop (cpu-ms/pod:
// this process and every process of the pods, their log shims included,
// once all are reaped, and the runtime's sandbox spawner), and the mean of each step the runtime traces
// (<stage>-ms: network, sandbox (the spawner's setup and the init's), podsandbox
// (all of the sandbox's start), logshim (the shim's fork and exec, not
// its start-up), create (the container stage until it is ready to
// execute), start, container (all of the container's start)). It needs
// root and user namespaces (skipped without):
//
//	go test -run '^$' -bench SandboxedPodStart -benchtime 20x ./
//	go test -run '^$' -bench SandboxedPodStart -benchtime 3x ./ -args -sandbox-bench.batch 30
//	go test -run '^$' -bench SandboxedPodStart -benchtime 20x ./ -args -sandbox-bench.stages
func BenchmarkSandboxedPodStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the sandbox needs root")
	}
	times := &stageTimes{times: map[string][]time.Duration{}}
	processruntime.SetStageTrace(times.record)
	defer processruntime.SetStageTrace(nil)
	dir, err := os.MkdirTemp("/var/tmp", "podkit-sandbox-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cidr := podrangetest.Range(b)
	bridge := podrangetest.Bridge(b, "pkb")
	opts := processruntime.Options{StateDir: filepath.Join(dir, "state"), PodCIDR: cidr, BridgeName: bridge}
	if sandboxBenchStages {
		opts.StageExecutable = buildStages(b, dir)
	}
	rt, err := processruntime.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		// The network first: a closed runtime's is closed too, and its
		// bridge would be left on the host.
		if err := rt.TeardownNetwork(context.Background()); err != nil {
			b.Error(err)
		}
		rt.Close()
		if base := rt.Containment().Cgroup; base != "" {
			_ = os.WriteFile(filepath.Join(base, "cgroup.kill"), []byte("1"), 0)
			_ = os.Remove(base)
		}
	}()
	if c := rt.Containment(); !c.Sandbox {
		b.Skipf("no sandbox on this machine: %s", c.SandboxFallback)
	}
	ctx := context.Background()
	// One pod first, untimed: the first start pays what later ones do not
	// (the bridge, the page cache).
	warm := newPod(v1.RestartPolicyAlways, "main", "exec sleep 3600")
	if _, err := rt.SyncPod(ctx, podworker.SyncPodSync, warm, nil, processruntime.PodStatus{}); err != nil {
		b.Fatal(err)
	}
	stop := func(pod *v1.Pod) {
		if err := rt.SyncTerminatingPod(ctx, pod, processruntime.PodStatus{}, 0, nil); err != nil {
			b.Fatal(err)
		}
		if err := rt.SyncTerminatedPod(ctx, pod, processruntime.PodStatus{}); err != nil {
			b.Fatal(err)
		}
	}
	stop(warm)
	times.mu.Lock()
	clear(times.times)
	times.mu.Unlock()

	var cpu time.Duration
	var walls []time.Duration
	var mu sync.Mutex
	b.ResetTimer()
	for range b.N {
		pods := make([]*v1.Pod, sandboxBenchBatch)
		for i := range pods {
			pods[i] = newPod(v1.RestartPolicyAlways, "main", "exec sleep 3600")
		}
		c0 := cpuTime()
		var wg sync.WaitGroup
		for _, pod := range pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				_, err := rt.SyncPod(ctx, podworker.SyncPodSync, pod, nil, processruntime.PodStatus{})
				took := time.Since(t0)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				walls = append(walls, took)
				mu.Unlock()
			}()
		}
		wg.Wait()
		b.StopTimer()
		for _, pod := range pods {
			if st, _ := rt.PodStatus(ctx, pod.UID, time.Time{}); !st.Running() {
				b.Fatalf("pod %s does not run after its first SyncPod", pod.Name)
			}
		}
		for _, pod := range pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stop(pod)
			}()
		}
		wg.Wait()
		cpu += cpuTime() - c0
		b.StartTimer()
	}
	if b.Failed() {
		return
	}
	b.StopTimer()
	slices.Sort(walls)
	b.ReportMetric(float64(walls[len(walls)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(walls[len(walls)*99/100])/1e6, "p99-ms")
	b.ReportMetric(float64(cpu)/1e6/float64(len(walls)), "cpu-ms/pod")
	times.mu.Lock()
	defer times.mu.Unlock()
	names := make([]string, 0, len(times.times))
	for name := range times.times {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var sum time.Duration
		for _, d := range times.times[name] {
			sum += d
		}
		b.ReportMetric(float64(sum)/1e6/float64(len(times.times[name])), name+"-ms")
	}
}
