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

// buildMockWithLimits builds virtual-kubelet's program as buildMock does,
// with its client's QPS and burst set to qps and burst, and, unless queue
// is zero, its pod controller queues' default rate limiter replaced by
// queue's (three defaults in node/podcontroller.go, and a file added
// beside it). The program has no
// flag for them (its client set, nodeutil.ClientsetFromEnv, takes
// client-go's defaults of 5 and 10), so it is built from a copy of
// virtual-kubelet's module (the version this module requires, copied from
// the module cache into a directory of the test) whose client set gets
// one added line that sets them, nothing else of the program changed;
// this module's go.mod, with a replace for that copy (go build -modfile),
// gives every other dependency. It skips where buildMock would, and fails
// when the file no longer has the line the patch goes before.
func buildMockWithLimits(tb testing.TB, qps, burst int, queue queueLimits) string {
	tb.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		tb.Skipf("virtualkubelet: no go command to build virtual-kubelet's mock provider: %v", err)
	}
	const vkModule = "github.com/virtual-kubelet/virtual-kubelet"
	out, err := exec.Command(goCmd, "list", "-m", "-f", "{{.Dir}} {{.GoMod}}", vkModule).Output()
	if err != nil {
		tb.Skipf("virtualkubelet: finding virtual-kubelet's source: %v", err)
	}
	vkDir, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	gomod, err := exec.Command(goCmd, "env", "GOMOD").Output()
	if err != nil {
		tb.Skipf("virtualkubelet: finding this module's go.mod: %v", err)
	}
	dir := tb.TempDir()
	copyDir := filepath.Join(dir, "virtual-kubelet")
	if err := os.CopyFS(copyDir, os.DirFS(vkDir)); err != nil {
		tb.Fatalf("virtualkubelet: copying virtual-kubelet's module: %v", err)
	}
	file := filepath.Join(copyDir, "node", "nodeutil", "client.go")
	src, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	const anchor = "\treturn kubernetes.NewForConfig(config)\n"
	if strings.Count(string(src), anchor) != 1 {
		tb.Fatalf("virtualkubelet: %s no longer has one %q to set the client limits before", file, strings.TrimSpace(anchor))
	}
	patched := strings.Replace(string(src), anchor,
		fmt.Sprintf("\tconfig.QPS, config.Burst = %d, %d // podkit's scale benchmark\n", qps, burst)+anchor, 1)
	if err := os.WriteFile(file, []byte(patched), 0o600); err != nil {
		tb.Fatal(err)
	}
	if queue.qps > 0 {
		file := filepath.Join(copyDir, "node", "podcontroller.go")
		src, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		const def = "workqueue.DefaultTypedControllerRateLimiter[any]()"
		if n := strings.Count(string(src), def); n != 3 {
			tb.Fatalf("virtualkubelet: %s has %d %q, not the three queue defaults the patch replaces", file, n, def)
		}
		patched := strings.ReplaceAll(string(src), def, "podkitBenchRateLimiter()")
		if err := os.WriteFile(file, []byte(patched), 0o600); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(copyDir, "node", "zz_podkit_bench_limiter.go"), []byte(mockQueueLimiter(queue)), 0o600); err != nil {
			tb.Fatal(err)
		}
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
	if err := os.WriteFile(modFile, mod, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o600); err != nil {
		tb.Fatal(err)
	}
	return buildMockProgram(tb, "-modfile", modFile)
}

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
