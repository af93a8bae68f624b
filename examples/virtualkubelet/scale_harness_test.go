package virtualkubelet_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
)

// The scale benchmark's harness: virtual-kubelet's program with explicit
// client limits, a counting proxy for it, request kinds, and the memory
// figures.

// queueLimits is the token bucket of virtual-kubelet's pod controller
// queues (the scale benchmark's scaleQueueQPS); the zero value means
// virtual-kubelet's default, client-go's controller rate limiter.
type queueLimits struct{ qps, burst int }

// limiter is q's rate limiter for one queue: client-go's controller rate
// limiter (per-item exponential retry backoff, 5 ms to 1000 s) with q's
// bucket in place of its 10 QPS, burst 100.
func (q queueLimits) limiter() workqueue.TypedRateLimiter[any] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, 1000*time.Second),
		&workqueue.TypedBucketRateLimiter[any]{Limiter: rate.NewLimiter(rate.Limit(q.qps), q.burst)},
	)
}

func (q queueLimits) String() string {
	if q.qps == 0 {
		return "at virtual-kubelet's default (10 QPS, burst 100)"
	}
	return fmt.Sprintf("at %d QPS (burst %d)", q.qps, q.burst)
}

// mockQueueLimiter is the file the program's build adds to virtual-kubelet's
// package node to give its pod controller queues q's limiter (limiter,
// written again in the copy's package).
func mockQueueLimiter(q queueLimits) string {
	return fmt.Sprintf(`package node

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// Added by podkit's scale benchmark: the pod controller queues' default.
func podkitBenchRateLimiter() workqueue.TypedRateLimiter[any] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, 1000*time.Second),
		&workqueue.TypedBucketRateLimiter[any]{Limiter: rate.NewLimiter(rate.Limit(%d), %d)},
	)
}
`, q.qps, q.burst)
}

// mockBuild is how the scale benchmark builds virtual-kubelet's program:
// the patches of its source (patchMockClient, patchMockQueues,
// patchMockPodsLock), nothing else of it changed.
type mockBuild struct {
	// qps and burst, unless qps is zero, are the program's client limits
	// (patchMockClient).
	qps, burst int
	// queue, unless zero, is the bucket of its pod controller queues
	// (patchMockQueues).
	queue queueLimits
	// podsLock gives the mock provider's pods map a lock
	// (patchMockPodsLock).
	podsLock bool
}

// buildMockWithLimits builds virtual-kubelet's program as buildMock does,
// from a copy of its source patched as o says. The program has no flag
// for its client limits (its client set, nodeutil.ClientsetFromEnv,
// takes client-go's defaults of 5 and 10) or its queues, so it is built
// from a copy of virtual-kubelet's module (mockModule). It skips where
// buildMock would, and fails when a patch no longer finds the text it
// expects.
func buildMockWithLimits(tb testing.TB, o mockBuild) string {
	tb.Helper()
	modFile := mockModule(tb, o)
	return buildMockProgram(tb, "-modfile", modFile)
}

const vkModule = "github.com/virtual-kubelet/virtual-kubelet"

// vkModuleDir is the module cache's copy of virtual-kubelet's module at
// the version this module requires; it skips where that cannot be found.
func vkModuleDir(tb testing.TB) string {
	tb.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		tb.Skipf("virtualkubelet: no go command to build virtual-kubelet's mock provider: %v", err)
	}
	out, err := exec.Command(goCmd, "list", "-m", "-f", "{{.Dir}}", vkModule).Output()
	if err != nil {
		tb.Skipf("virtualkubelet: finding virtual-kubelet's source: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// mockModule copies virtual-kubelet's module (the version this module
// requires, from the module cache) into a directory of the test, patches
// the copy as o says, and returns the path of a go.mod for building from
// it: this module's go.mod (and go.sum), which gives every other
// dependency, with a replace for the copy (go build -modfile). The copy's
// root is the returned file's directory's "virtual-kubelet".
func mockModule(tb testing.TB, o mockBuild) string {
	tb.Helper()
	vkDir := vkModuleDir(tb)
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Skipf("virtualkubelet: finding this module's go.mod: %v", err)
	}
	dir := tb.TempDir()
	copyDir := filepath.Join(dir, "virtual-kubelet")
	if err := os.CopyFS(copyDir, os.DirFS(vkDir)); err != nil {
		tb.Fatalf("virtualkubelet: copying virtual-kubelet's module: %v", err)
	}
	if o.qps > 0 {
		patchFile(tb, filepath.Join(copyDir, "node", "nodeutil", "client.go"), func(src string) (string, error) {
			return patchMockClient(src, o.qps, o.burst)
		})
	}
	if o.queue.qps > 0 {
		patchFile(tb, filepath.Join(copyDir, "node", "podcontroller.go"), patchMockQueues)
		writeFile(tb, filepath.Join(copyDir, "node", "zz_podkit_bench_limiter.go"), mockQueueLimiter(o.queue))
	}
	if o.podsLock {
		mockDir := filepath.Join(copyDir, filepath.FromSlash(mockProviderDir))
		patchFile(tb, filepath.Join(mockDir, "mock.go"), patchMockPodsLock)
		writeFile(tb, filepath.Join(mockDir, "zz_podkit_pods_lock.go"), mockPodsLockFile)
	}
	modPath := strings.TrimSpace(string(gomod))
	mod, err := os.ReadFile(modPath)
	if err != nil {
		tb.Fatal(err)
	}
	sum, err := os.ReadFile(strings.TrimSuffix(modPath, ".mod") + ".sum")
	if err != nil {
		tb.Fatal(err)
	}
	mod = fmt.Appendf(mod, "\nreplace %s => %s\n", vkModule, copyDir)
	modFile := filepath.Join(dir, "go.mod")
	writeFile(tb, modFile, string(mod))
	writeFile(tb, filepath.Join(dir, "go.sum"), string(sum))
	return modFile
}

// patchFile replaces the file's text by patch's result; a patch's error
// (the text it expects is not there) fails the test, naming the file.
func patchFile(tb testing.TB, file string, patch func(string) (string, error)) {
	tb.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	patched, err := patch(string(src))
	if err != nil {
		tb.Fatalf("virtualkubelet: patching %s: %v", file, err)
	}
	writeFile(tb, file, patched)
}

func writeFile(tb testing.TB, file, text string) {
	tb.Helper()
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// textPatch is one replacement of a patch: old, which the source must
// have exactly count times, by new.
type textPatch struct {
	old, new string
	count    int
}

// applyPatches applies ps to src in order, or returns an error naming the
// first old text src does not have the expected number of times.
func applyPatches(src string, ps ...textPatch) (string, error) {
	for _, p := range ps {
		if n := strings.Count(src, p.old); n != p.count {
			return "", fmt.Errorf("found %d of %q, want %d: virtual-kubelet's source is not the text the patch was written for", n, p.old, p.count)
		}
		src = strings.ReplaceAll(src, p.old, p.new)
	}
	return src, nil
}

// patchMockClient sets the client limits of virtual-kubelet's client set
// (node/nodeutil/client.go) to qps and burst: one line added before its
// one return of kubernetes.NewForConfig.
func patchMockClient(src string, qps, burst int) (string, error) {
	const anchor = "\treturn kubernetes.NewForConfig(config)\n"
	return applyPatches(src, textPatch{
		old:   anchor,
		new:   fmt.Sprintf("\tconfig.QPS, config.Burst = %d, %d // podkit's scale benchmark\n", qps, burst) + anchor,
		count: 1,
	})
}

// patchMockQueues replaces the three queue defaults of virtual-kubelet's
// pod controller (node/podcontroller.go) by podkitBenchRateLimiter, the
// function of mockQueueLimiter's file.
func patchMockQueues(src string) (string, error) {
	return applyPatches(src, textPatch{
		old:   "workqueue.DefaultTypedControllerRateLimiter[any]()",
		new:   "podkitBenchRateLimiter()",
		count: 3,
	})
}

// mockProviderDir is the mock provider's package in virtual-kubelet's
// module.
const mockProviderDir = "cmd/virtual-kubelet/internal/provider/mock"

// mockPodsUses is how many times virtual-kubelet v1.14.1's mock.go reads
// or writes its pods map (p.pods): two stores (CreatePod, UpdatePod), a
// lookup and a delete (DeletePod), a lookup (GetPod, which GetPodStatus
// calls) and three loops over every pod (GetPods, GetStatsSummary,
// GetMetricsResource). patchMockPodsLock guards each.
const mockPodsUses = 8

// patchMockPodsLock gives the pods map of virtual-kubelet's mock provider
// (mock.go of mockProviderDir) a sync.RWMutex, podsMu, guarding every use
// of the map: its stores and its delete (with DeletePod's lookup, so that
// the lookup and the delete are one step) under the write lock, GetPod's
// lookup under the read lock, and the three loops over every pod ranging
// over podkitPods, a copy taken under the read lock (mockPodsLockFile,
// which also declares the lock's type: mock.go's imports stay as they
// are). Nothing else changes: the same calls store, find, list and delete
// the same pods. It fails when mock.go does not use the map exactly where
// v1.14.1 does (mockPodsUses), so that a new use cannot go unguarded.
//
// Without it, the mock's pod sync workers race on the map (CreatePod's
// store against GetPod's lookup): at the scale benchmark's pace the
// program dies of "fatal error: concurrent map read and map write".
func patchMockPodsLock(src string) (string, error) {
	if n := strings.Count(src, "p.pods"); n != mockPodsUses {
		return "", fmt.Errorf("found %d uses of p.pods, want the %d the lock patch guards: virtual-kubelet's source is not the text the patch was written for", n, mockPodsUses)
	}
	return applyPatches(src,
		textPatch{
			old:   "\tpods               map[string]*v1.Pod\n",
			new:   "\tpods               map[string]*v1.Pod\n\tpodsMu             podkitPodsLock // podkit's scale benchmark: guards pods\n",
			count: 1,
		},
		textPatch{ // CreatePod, UpdatePod
			old:   "\tp.pods[key] = pod\n",
			new:   "\tp.podsMu.Lock()\n\tp.pods[key] = pod\n\tp.podsMu.Unlock()\n",
			count: 2,
		},
		textPatch{ // DeletePod
			old: "\tif _, exists := p.pods[key]; !exists {\n" +
				"\t\treturn errdefs.NotFound(\"pod not found\")\n" +
				"\t}\n" +
				"\n" +
				"\tnow := metav1.Now()\n" +
				"\tdelete(p.pods, key)\n",
			new: "\tp.podsMu.Lock()\n" +
				"\tif _, exists := p.pods[key]; !exists {\n" +
				"\t\tp.podsMu.Unlock()\n" +
				"\t\treturn errdefs.NotFound(\"pod not found\")\n" +
				"\t}\n" +
				"\n" +
				"\tnow := metav1.Now()\n" +
				"\tdelete(p.pods, key)\n" +
				"\tp.podsMu.Unlock()\n",
			count: 1,
		},
		textPatch{ // GetPod (pod is its named result)
			old:   "\tif pod, ok := p.pods[key]; ok {\n",
			new:   "\tp.podsMu.RLock()\n\tpod, ok := p.pods[key]\n\tp.podsMu.RUnlock()\n\tif ok {\n",
			count: 1,
		},
		textPatch{ // GetPods, GetStatsSummary, GetMetricsResource
			old:   "range p.pods {",
			new:   "range p.podkitPods() {",
			count: 3,
		},
	)
}

// mockPodsLockFile is the file patchMockPodsLock's build adds to the mock
// provider's package.
const mockPodsLockFile = `package mock

import (
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Added by podkit's scale benchmark: the type of MockProvider.podsMu,
// which guards MockProvider.pods.
type podkitPodsLock = sync.RWMutex

// podkitPods is every pod of p.pods, copied under p.podsMu, for the loops
// over every pod.
func (p *MockProvider) podkitPods() []*v1.Pod {
	p.podsMu.RLock()
	defer p.podsMu.RUnlock()
	pods := make([]*v1.Pod, 0, len(p.pods))
	for _, pod := range p.pods {
		pods = append(pods, pod)
	}
	return pods
}
`

// startCountingProxy serves, on a loopback port, a reverse proxy to the
// API server of upstream, with upstream's credentials, counting every
// request in counter; it returns the proxy's URL. It stops with the test.
func startCountingProxy(tb testing.TB, upstream *rest.Config, counter *requestCounter) string {
	tb.Helper()
	rt, err := rest.TransportFor(upstream)
	if err != nil {
		tb.Fatal(err)
	}
	target, err := url.Parse(upstream.Host)
	if err != nil {
		tb.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     counter.wrap(rt),
		FlushInterval: -1, // watches stream
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: time.Minute}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	tb.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("counting proxy: %v", err)
		}
	})
	return "http://" + l.Addr().String()
}

// writeProxyKubeconfig writes a kubeconfig for server (the counting proxy,
// which adds the credentials) and returns its path.
func writeProxyKubeconfig(tb testing.TB, server string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	config := `apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: ` + server + `
users:
- name: proxy
  user: {}
contexts:
- name: proxy
  context:
    cluster: proxy
    user: proxy
current-context: proxy
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// requestKind names a request to the API server by verb and resource
// ("update pods/status", "watch pods", "create events").
func requestKind(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return r.Method + " " + r.URL.Path
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return r.Method + " " + r.URL.Path
	}
	resource, named := parts[0], len(parts) > 1
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	verb := strings.ToLower(r.Method)
	switch r.Method {
	case http.MethodGet:
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodDelete:
		if !named {
			verb = "deletecollection"
		}
	}
	return verb + " " + resource
}

func total(split map[string]int) int {
	n := 0
	for _, v := range split {
		n += v
	}
	return n
}

// formatSplit lists the counts, largest first.
func formatSplit(split map[string]int) string {
	kinds := make([]string, 0, len(split))
	for k := range split {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if split[a] != split[b] {
			return split[b] - split[a]
		}
		return strings.Compare(a, b)
	})
	var sb strings.Builder
	for i, k := range kinds {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s %d", k, split[k])
	}
	return sb.String()
}

// heapInUse is this process's heap in use after a garbage collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// rssOf is the resident set size of process pid in bytes (0 when it
// cannot be read).
func rssOf(pid int) int64 {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// loadAverage is the machine's load average (/proc/loadavg's first three
// figures), for the benchmark's log.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}
