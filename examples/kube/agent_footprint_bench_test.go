package kube_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// The agent footprint benchmark: one podkit-agent process running
// footprintPods pods, on a cluster of no other node.
const (
	footprintPods = 30
	// footprintSettle is how long the agent runs its pods before its
	// steady figures are read: a few heartbeats, housekeeping runs and
	// volume refreshes after the last pod started.
	footprintSettle = 20 * time.Second
)

var footprintArgs = flag.String("footprint.args", "", "BenchmarkAgentFootprint: extra podkit-agent flags for every agent, space-separated (such as --binary-paging readahead), to measure a setting")

var footprintEnv = flag.String("footprint.env", "", "BenchmarkAgentFootprint: extra environment variables for every agent, space-separated NAME=VALUE (such as GOGC=50), to measure a setting of the Go runtime")

var footprintAgent = flag.String("footprint.agent", "", "BenchmarkAgentFootprint: the podkit-agent binary to run (such as one built with CGO_ENABLED=0), to measure a build setting; empty: cmd/podkit-agent built from this module, with cmd/podkit-stages beside it")

var footprintProfiles = flag.String("footprint.profiles", "", "BenchmarkAgentFootprint: a directory to write each agent's heap and allocation profiles (heap-<sub-benchmark>-<iteration>.pprof, allocs-…), goroutines (goroutine-….txt) and /proc/<pid>/smaps (smaps-….txt) to, read at the steady point")

// A footprintCase is one sub-benchmark: the agent's extra flags and the
// pods it runs.
type footprintCase struct {
	name  string
	flags []string
	pod   func(ns string, i int) *v1.Pod
	// objects creates what the pods of namespace ns reference.
	objects func(ctx context.Context, cs kubernetes.Interface, ns string) error
}

// BenchmarkAgentFootprint runs one podkit-agent process (the command, as a
// node runs it) with footprintPods pods, and reports what it costs: its
// resident memory once every pod runs and footprintSettle later
// (rss-MiB), its peak (peak-rss-MiB, VmHWM), the Go heap in use and the
// goroutines then, the API requests it sent from its start until every pod
// ran (api-requests) and during the settle time (settle-api-requests), and
// the pods' startup, creation to Running as a watch sees it (p50-s,
// p99-s), and the CPU time the agent used until every pod ran (cpu-s) and
// during the settle time (settle-cpu-s). The pods are bound to the node at creation (no scheduler).
//
// Each sub-benchmark turns one feature on or off, so a feature's cost is
// the difference between two of them:
//
//	plain           pods with no service account token and no service links
//	                (automountServiceAccountToken and enableServiceLinks false)
//	token           the default pod: a projected service account token (one
//	                TokenRequest per pod, a watch of kube-root-ca.crt) and
//	                service links
//	token/services  token, and footprintPods Services of two ports in the
//	                pods' namespace: the Services watch's cache, and each
//	                pod's service variables (13 per Service)
//	objects         token, and each pod an env var from a config map of its
//	                own and a secret volume of its own (two per-object watches
//	                per pod)
//	objects/sandbox-off      objects, with --sandbox off
//	objects/kubelet-api-off  objects, without the kubelet API (no --client-ca-file)
//	objects/memory-limit     objects, with --memory-limit 18Mi (a soft limit
//	                         on the Go runtime's memory)
//	objects/own-stages       objects, the pods' sandbox stages and log shims
//	                         running the agent's own binary
//	                         (--stage-executable self) rather than the
//	                         cmd/podkit-stages installed beside it
//
// It also reports how long the agent took from its start to its Node
// Ready (ready-s). -footprint.args adds flags to every agent, and
// -footprint.env environment variables (such as GOGC=50), to measure a
// setting against the default; -footprint.agent runs a binary built
// otherwise (such as with CGO_ENABLED=0).
//
// Every iteration runs a fresh agent (a node of its own) and namespace,
// from a binary out of the page cache (dropPageCache).
//
//	go test -run '^$' -bench AgentFootprint -benchtime 3x -footprint.profiles /tmp/fp ./
func BenchmarkAgentFootprint(b *testing.B) {
	dir := b.TempDir()
	logs, err := os.Create(filepath.Join(dir, "cluster.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logs.Close()
	ctx := context.Background()
	c, err := clustertest.Start(ctx, clustertest.Options{ControlPlaneLog: logs})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			b.Error(err)
		}
	}()
	plain := func(ns string, i int) *v1.Pod {
		off := false
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%02d", i)}, Spec: scriptSpec("exec sleep 3600")}
		pod.Spec.AutomountServiceAccountToken, pod.Spec.EnableServiceLinks = &off, &off
		return pod
	}
	token := func(ns string, i int) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%02d", i)}, Spec: scriptSpec("exec sleep 3600")}
	}
	objects := func(ns string, i int) *v1.Pod {
		pod := token(ns, i)
		name := fmt.Sprintf("o-%02d", i)
		main := &pod.Spec.Containers[0]
		main.Env = append(main.Env, v1.EnvVar{Name: "SETTING", ValueFrom: &v1.EnvVarSource{
			ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: "setting"},
		}})
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: name}}})
		main.VolumeMounts = append(main.VolumeMounts, v1.VolumeMount{Name: "secret", MountPath: "/etc/secret"})
		return pod
	}
	createObjects := func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		for i := range footprintPods {
			name := fmt.Sprintf("o-%02d", i)
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"setting": "on"}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}
	createServices := func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		for i := range footprintPods {
			svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%02d", i)}, Spec: v1.ServiceSpec{Ports: []v1.ServicePort{
				{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}, {Name: "metrics", Port: 9090, Protocol: v1.ProtocolTCP},
			}}}
			if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}
	cases := []footprintCase{
		{name: "plain", pod: plain},
		{name: "token", pod: token},
		{name: "token/services", pod: token, objects: createServices},
		{name: "objects", pod: objects, objects: createObjects},
		{name: "objects/sandbox-off", flags: []string{"--sandbox", "off"}, pod: objects, objects: createObjects},
		{name: "objects/kubelet-api-off", flags: []string{"--no-kubelet-api"}, pod: objects, objects: createObjects},
		{name: "objects/memory-limit", flags: []string{"--memory-limit", "18Mi"}, pod: objects, objects: createObjects},
		{name: "objects/own-stages", flags: []string{"--stage-executable", "self"}, pod: objects, objects: createObjects},
	}
	run := 0
	for _, fc := range cases {
		b.Run(fc.name, func(b *testing.B) {
			var ready, rss, hwm, anon, file, heap, goroutines, requests, p99 []float64
			for i := range b.N {
				run++
				f := measureFootprint(b, c, fc, fmt.Sprintf("fp-%d", run), fmt.Sprintf("%s-%d", filepath.Base(fc.name), i))
				ready, rss, hwm, heap = append(ready, f.ready), append(rss, f.rss), append(hwm, f.hwm), append(heap, f.heap)
				anon, file = append(anon, f.anon), append(file, f.file)
				goroutines, requests, p99 = append(goroutines, f.goroutines), append(requests, f.requests), append(p99, f.p99)
				b.ReportMetric(f.startRSS, "start-rss-MiB")
				b.ReportMetric(f.settleRequests, "settle-api-requests")
				b.ReportMetric(f.p50, "p50-s")
				b.ReportMetric(f.cpu, "cpu-s")
				b.ReportMetric(f.settleCPU, "settle-cpu-s")
			}
			report := func(values []float64, unit string) {
				slices.Sort(values)
				b.ReportMetric(values[len(values)/2], unit)
				if len(values) > 1 {
					b.ReportMetric(values[len(values)-1]-values[0], unit+"-spread")
				}
			}
			report(ready, "ready-s")
			report(rss, "rss-MiB")
			report(hwm, "peak-rss-MiB")
			report(anon, "rss-anon-MiB")
			report(file, "rss-file-MiB")
			report(heap, "heap-inuse-MiB")
			report(goroutines, "goroutines")
			report(requests, "api-requests")
			report(p99, "p99-s")
		})
	}
}

// footprint is what one agent run measured.
type footprint struct {
	ready                    float64 // seconds from the agent's start to its Node Ready
	startRSS, rss, hwm, heap float64 // MiB
	anon, file               float64 // MiB: rss's anonymous memory, and the binary's pages

	goroutines               float64
	requests, settleRequests float64
	p50, p99                 float64 // seconds
	cpu, settleCPU           float64 // CPU-seconds: until every pod ran, and during the settle time
	threads                  int     // the agent's OS threads
	podProcs                 []processGroup
}

// measureFootprint runs one agent as node name with fc's flags and pods,
// and measures it. label names its heap profile.
func measureFootprint(b *testing.B, c *clustertest.Cluster, fc footprintCase, name, label string) footprint {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := b.TempDir()
	debug := freeLoopbackAddress(b)
	args := append([]string{"--debug-address", debug}, fc.flags...)
	args = append(args, strings.Fields(*footprintArgs)...)
	pid, ready, stop := startFootprintAgent(b, c, name, dir, args)
	defer stop()
	admin := c.Admin()
	ns := "fp-" + name
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	defer deleteNamespace(b, admin, ns)
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		b.Fatal(err)
	}
	if fc.objects != nil {
		if err := fc.objects(ctx, admin, ns); err != nil {
			b.Fatal(err)
		}
	}
	w, err := admin.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	b.StartTimer()
	created := map[string]time.Time{}
	var uids []string
	for i := range footprintPods {
		pod := fc.pod(ns, i)
		pod.Spec.NodeName = name
		grace := int64(1) // sleep as a sandbox's PID 1 ignores SIGTERM
		pod.Spec.TerminationGracePeriodSeconds = &grace
		created[pod.Name] = time.Now()
		made, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		uids = append(uids, string(made.UID))
	}
	var lat []time.Duration
	running := map[string]bool{}
	for len(running) < footprintPods {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("the watch ended with %d of %d pods running", len(running), footprintPods)
			}
			if p, ok := ev.Object.(*v1.Pod); ok && p.Status.Phase == v1.PodRunning && !running[p.Name] {
				running[p.Name] = true
				lat = append(lat, time.Since(created[p.Name]))
			}
		case <-ctx.Done():
			b.Fatalf("%d of %d pods running after 5 minutes", len(running), footprintPods)
		}
	}
	b.StopTimer()
	f := footprint{ready: ready.Seconds()}
	slices.Sort(lat)
	f.p50, f.p99 = lat[len(lat)/2].Seconds(), lat[min(len(lat)-1, len(lat)*99/100)].Seconds()
	startVars := debugVars(b, debug)
	startRSS, _ := processMemory(b, pid)
	startCPU := processCPU(b, pid)
	f.cpu = startCPU.Seconds()
	f.startRSS = float64(startRSS) / (1 << 20)
	select {
	case <-time.After(footprintSettle): // the steady state is a time of running pods
	case <-ctx.Done():
		b.Fatal(ctx.Err())
	}
	vars := debugVars(b, debug)
	rss, hwm := processMemory(b, pid)
	f.settleCPU = (processCPU(b, pid) - startCPU).Seconds()
	f.rss, f.hwm = float64(rss)/(1<<20), float64(hwm)/(1<<20)
	anon, file, threads := residentSplit(b, pid)
	f.threads = threads
	f.anon, f.file = float64(anon)/(1<<20), float64(file)/(1<<20)
	f.heap = float64(vars.MemStats.HeapInuse) / (1 << 20)
	f.podProcs = podProcessMemory(b, pid, filepath.Join(dir, "agent-state"), uids)
	f.goroutines = float64(vars.Agent.Goroutines)
	f.requests = float64(startVars.Agent.APIRequests["total"])
	f.settleRequests = float64(vars.Agent.APIRequests["total"] - startVars.Agent.APIRequests["total"])
	b.Logf("%s: RSS %.1f MiB at start, %.1f MiB steady (%.1f anonymous, %.1f the binary's pages; peak %.1f), heap in use %.1f MiB (sys %.1f MiB, GC goal %.1f MiB), %d goroutines; CPU %.2f s until running, %.2f s settling; API requests until running %v",
		label, f.startRSS, f.rss, f.anon, f.file, f.hwm, f.heap, float64(vars.MemStats.Sys)/(1<<20), float64(vars.MemStats.NextGC)/(1<<20), vars.Agent.Goroutines, f.cpu, f.settleCPU, startVars.Agent.APIRequests)
	mib := func(n uint64) float64 { return float64(n) / (1 << 20) }
	ms := vars.MemStats
	b.Logf("%s: Go runtime: heap in use %.1f, idle %.1f (released %.1f), stacks %.1f, spans %.1f, GC metadata %.1f, other %.1f MiB; GC cycles %d; %d threads",
		label, mib(ms.HeapInuse), mib(ms.HeapIdle), mib(ms.HeapReleased), mib(ms.StackInuse), mib(ms.MSpanInuse), mib(ms.GCSys), mib(ms.OtherSys), ms.NumGC, f.threads)
	b.ReportMetric(float64(f.threads), "threads")
	for _, g := range f.podProcs {
		b.Logf("%s: pod processes %s: %d, RSS %.1f MiB in all (PSS %.1f)", label, g.comm, g.n, mib(uint64(g.rss)), mib(uint64(g.pss)))
	}
	if *footprintProfiles != "" {
		copyFile(b, fmt.Sprintf("/proc/%d/smaps", pid), filepath.Join(*footprintProfiles, "smaps-"+label+".txt"))
		saveResidentPages(b, pid, filepath.Join(*footprintProfiles, "resident-"+label+".txt"))
		saveHeapProfile(b, debug, filepath.Join(*footprintProfiles, "heap-"+label+".pprof"))
		saveDebug(b, "http://"+debug+"/debug/pprof/goroutine?debug=1", filepath.Join(*footprintProfiles, "goroutine-"+label+".txt"))
		saveDebug(b, "http://"+debug+"/debug/pprof/allocs", filepath.Join(*footprintProfiles, "allocs-"+label+".pprof"))
	}
	return f
}

// residentSplit returns the anonymous and the file-backed parts of
// process pid's resident memory (RssAnon, RssFile), in bytes: the agent's
// own memory, and the pages of its binary it has mapped; and its number of
// threads.
func residentSplit(b *testing.B, pid int) (anon, file int64, threads int) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		key, value, _ := strings.Cut(line, ":")
		fields := strings.Fields(value)
		if key == "Threads" && len(fields) == 1 {
			threads, _ = strconv.Atoi(fields[0])
		}
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, _ := strconv.ParseInt(fields[0], 10, 64)
		switch key {
		case "RssAnon":
			anon = kb << 10
		case "RssFile":
			file = kb << 10
		}
	}
	return anon, file, threads
}

// agentVars is what the footprint benchmark reads of an agent's
// /debug/vars.
type agentVars struct {
	Agent struct {
		Goroutines  int            `json:"goroutines"`
		APIRequests map[string]int `json:"apiRequests"`
	} `json:"agent"`
	MemStats struct {
		HeapInuse, Sys, NextGC                                          uint64
		HeapIdle, HeapReleased, StackInuse, MSpanInuse, GCSys, OtherSys uint64
		NumGC                                                           uint32
	} `json:"memstats"`
}

func debugVars(b *testing.B, addr string) agentVars {
	resp, err := http.Get("http://" + addr + "/debug/vars")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var v agentVars
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		b.Fatalf("the agent's /debug/vars: %v", err)
	}
	return v
}

// saveHeapProfile writes the agent's heap profile (after a GC) to path.
func saveHeapProfile(b *testing.B, addr, path string) {
	saveDebug(b, "http://"+addr+"/debug/pprof/heap?gc=1", path)
}

// copyFile copies from (such as a /proc file) to path.
func copyFile(b *testing.B, from, path string) {
	raw, err := os.ReadFile(from)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		b.Fatal(err)
	}
}

// saveDebug writes what url (one of the agent's /debug/ pages) serves to
// path.
func saveDebug(b *testing.B, url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, resp.Body); err != nil {
		b.Fatal(err)
	}
}

// freeLoopbackAddress returns a 127.0.0.1 address with a port free now.
func freeLoopbackAddress(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startFootprintAgent runs the podkit-agent command as node name with the
// kubelet API and args, as startAgentProcess does, until the returned stop
// is called; it returns once the node is Ready.
func startFootprintAgent(b *testing.B, c *clustertest.Cluster, name, dir string, args []string) (int, time.Duration, func()) {
	bin := *footprintAgent
	if bin == "" {
		bin = buildAgentInstall(b)
	}
	dropPageCache(b, bin)
	stages := filepath.Join(filepath.Dir(bin), processruntime.StageExecutableName)
	if _, err := os.Stat(stages); err == nil {
		dropPageCache(b, stages)
	}
	cfg, err := c.NodeConfig(name)
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "agent.kubeconfig")
	if err := clustertest.WriteKubeconfig(kubeconfig, cfg); err != nil {
		b.Fatal(err)
	}
	stateDir := filepath.Join(dir, "agent-state")
	base := []string{"--kubeconfig", kubeconfig, "--node-name", name, "--state-dir", stateDir, "--kubelet-port", "0", "--pod-cidr", "none"}
	if i := slices.Index(args, "--no-kubelet-api"); i >= 0 {
		args = slices.Delete(slices.Clone(args), i, i+1)
	} else {
		caFile := filepath.Join(dir, "ca.crt")
		if err := os.WriteFile(caFile, c.AdminConfig().CAData, 0o600); err != nil {
			b.Fatal(err)
		}
		base = append(base, "--client-ca-file", caFile)
	}
	cmd := exec.Command(bin, append(base, args...)...)
	if env := strings.Fields(*footprintEnv); len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	start := time.Now()
	stopAgent := runAgentCommand(b, cmd, dir)
	stop := func() {
		stopAgent()
		if err := clustertest.StopPodProcesses(stateDir); err != nil {
			b.Error(err)
		}
		if err := c.Admin().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			b.Error(err)
		}
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.Admin().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && nodeReady(n), nil
	})
	if err != nil {
		stop()
		b.Fatalf("the podkit-agent node did not become Ready: %v", err)
	}
	return cmd.Process.Pid, time.Since(start), stop
}

// A processGroup is the pods' processes of one name (argv[0]): how many,
// and their resident memory summed (RSS; PSS shares each page among the
// processes mapping it), in bytes.
type processGroup struct {
	comm     string
	n        int
	rss, pss int64
}

// podProcessMemory returns the memory of the processes the agent pid
// started for its pods (the sandboxes' init, log shims, stage processes,
// the containers), grouped by name: every other process whose command
// line names the agent's stateDir or whose environment names one of the
// pods' uids.
func podProcessMemory(b *testing.B, pid int, stateDir string, uids []string) []processGroup {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	groups := map[string]*processGroup{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid || p == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		ours := strings.Contains(string(cmdline), stateDir)
		for _, uid := range uids {
			ours = ours || strings.Contains(string(environ), uid)
		}
		if !ours {
			continue
		}
		rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			continue // gone meanwhile
		}
		// The program's name as its starter gave it: the shims and
		// sandboxes run the agent's binary again (comm "exe").
		name, _, _ := strings.Cut(string(cmdline), "\x00")
		name = filepath.Base(name)
		g := groups[name]
		if g == nil {
			g = &processGroup{comm: name}
			groups[name] = g
		}
		g.n++
		for line := range strings.Lines(string(rollup)) {
			key, value, _ := strings.Cut(line, ":")
			fields := strings.Fields(value)
			if len(fields) != 2 {
				continue
			}
			kb, _ := strconv.ParseInt(fields[0], 10, 64)
			switch key {
			case "Rss":
				g.rss += kb << 10
			case "Pss":
				g.pss += kb << 10
			}
		}
	}
	var out []processGroup
	for _, g := range groups {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b processGroup) int { return strings.Compare(a.comm, b.comm) })
	return out
}

// saveResidentPages writes to path the resident pages of process pid's
// mappings of its own executable, from /proc/<pid>/pagemap: a line
// "<file offset> <permissions>" (hexadecimal offset) per resident page, for
// mapping to the binary's sections and symbols.
func saveResidentPages(b *testing.B, pid int, path string) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		b.Fatal(err)
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		b.Fatal(err)
	}
	pagemap, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer pagemap.Close()
	page := uint64(os.Getpagesize())
	var out strings.Builder
	for line := range strings.Lines(string(maps)) {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		from, to, _ := strings.Cut(fields[0], "-")
		start, _ := strconv.ParseUint(from, 16, 64)
		end, _ := strconv.ParseUint(to, 16, 64)
		offset, _ := strconv.ParseUint(fields[2], 16, 64)
		entries := make([]byte, (end-start)/page*8)
		if _, err := pagemap.ReadAt(entries, int64(start/page*8)); err != nil {
			b.Fatal(err)
		}
		for i := range (end - start) / page {
			entry := uint64(entries[i*8]) | uint64(entries[i*8+1])<<8 | uint64(entries[i*8+2])<<16 | uint64(entries[i*8+3])<<24 |
				uint64(entries[i*8+4])<<32 | uint64(entries[i*8+5])<<40 | uint64(entries[i*8+6])<<48 | uint64(entries[i*8+7])<<56
			if entry&(1<<63) != 0 {
				fmt.Fprintf(&out, "%x %s\n", offset+i*page, fields[1])
			}
		}
	}
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}
