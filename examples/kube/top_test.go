package kube_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podkit/podkit/examples/kube/clustertest"
)

// metricsServerBuildTimeout bounds the harness's build of metrics-server:
// the first on a machine compiles its own Kubernetes libraries (minutes
// on a loaded machine); later ones find it up to date in seconds.
const metricsServerBuildTimeout = 30 * time.Minute

// buildMetricsServer builds metrics-server for the harness (its
// Options.MetricsServerBinary) before the cluster starts, so that a first
// build does not count against the start's timeout.
func buildMetricsServer(t *testing.T, log io.Writer) string {
	t.Helper()
	start := time.Now()
	bin, err := clustertest.BuildMetricsServer(testContextFor(t, metricsServerBuildTimeout), log)
	require.NoError(t, err)
	t.Logf("metrics-server built (or found up to date) in %v", time.Since(start).Round(time.Millisecond))
	return bin
}

// The pods of testKubectlTop: one burns CPU, capped at burnerCPU by its
// limit (so that it takes a fifth of a core, not a whole one, of the
// machine the other scenarios share), and holds burnerMemory bytes in a
// shell variable; one sleeps.
const (
	burnerCPU    = "200m"
	burnerMemory = 16 << 20
	burnerScript = `x=$(head -c 16777216 /dev/zero | tr '\0' a); while :; do :; done`
)

// testKubectlTop: the real kubectl top node and top pod answer on the
// harness, from metrics-server (clustertest's Options.MetricsServer)
// scraping the podkit nodes' /metrics/resource: every node of the pool
// listed with CPU and memory above zero, and the pods with figures that
// tell them apart (the burner's CPU above the sleeper's, its memory at
// least what it holds).
func testKubectlTop(t *testing.T, h *harness) {
	nodes := h.pool(t, "top", 2)
	ns := h.namespace(t, "top")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)

	burner := poolPod(ns, "top", "burner", burnerScript)
	burner.Spec.NodeName = nodes[0].Name()
	burner.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(burnerCPU)}
	sleeper := poolPod(ns, "top", "sleeper", "exec sleep 3600")
	sleeper.Spec.NodeName = nodes[1].Name()
	for _, p := range []*v1.Pod{burner, sleeper} {
		_, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitPods(t, admin, ns, "", "both Running", allRunning(2))
	start := time.Now()

	// metrics-server answers for a node or pod once it has scraped it
	// twice (a rate of CPU use needs two points), until then kubectl
	// prints <unknown> for a node or leaves the pod out. The kubectl of
	// the scenario has a home of its own whose discovery cache each try
	// drops: kubectl keeps discovery for hours, and one run while the API
	// server had the metrics API out of its discovery (metrics-server
	// slow to answer the aggregator's check on a loaded machine) would
	// otherwise have every later try say "Metrics API not available".
	k := &kubectl{bin: h.kubectl.bin, kubeconfig: h.kubectl.kubeconfig, home: t.TempDir()}
	top := func(what string, names []string, args ...string) map[string]topFigures {
		var out, errOut string
		var figures map[string]topFigures
		err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
			require.NoError(t, os.RemoveAll(filepath.Join(k.home, ".kube", "cache")))
			var err error
			if out, errOut, err = k.try(t, args...); err != nil {
				return false, nil
			}
			figures = parseTop(out)
			for _, n := range names {
				if _, ok := figures[n]; !ok {
					return false, nil
				}
			}
			return true, nil
		})
		require.NoError(t, err, "kubectl %s never listed %v with figures; last: %s%s", strings.Join(args, " "), names, out, errOut)
		t.Logf("kubectl top %s answered for %v %v after the pods ran", what, names, time.Since(start).Round(time.Millisecond))
		return figures
	}

	nodeNames := []string{nodes[0].Name(), nodes[1].Name()}
	figures := top("node", nodeNames, "top", "node", "-l", poolLabel+"=top")
	require.Len(t, figures, len(nodes), "every node of the pool, and no other")
	for _, n := range nodeNames {
		f := figures[n]
		require.Positive(t, f.cpu.MilliValue(), "CPU of node %s", n)
		require.Positive(t, f.memory.Value(), "memory of node %s", n)
	}

	figures = top("pod", []string{"burner", "sleeper"}, "top", "pod", "-n", ns)
	require.Len(t, figures, 2)
	b, s := figures["burner"], figures["sleeper"]
	require.Greater(t, b.cpu.MilliValue(), s.cpu.MilliValue(), "the burner's CPU (%v) above the sleeper's (%v)", &b.cpu, &s.cpu)
	require.GreaterOrEqual(t, b.cpu.MilliValue(), int64(20), "the burner burns CPU: %v", &b.cpu)
	// Three quarters: kubectl rounds down to MiB, and a page or two of
	// the string may be reclaimed or not yet counted.
	require.GreaterOrEqual(t, b.memory.Value(), int64(burnerMemory*3/4), "the burner's memory (%v) holds its %d bytes", &b.memory, burnerMemory)
	require.Greater(t, b.memory.Value(), s.memory.Value(), "the burner's memory (%v) above the sleeper's (%v)", &b.memory, &s.memory)
}

// topFigures are the CPU and memory of a line of kubectl top.
type topFigures struct {
	cpu, memory resource.Quantity
}

// parseTop returns the figures of each line of kubectl top's output
// (NAME CPU(cores) [CPU(%)] MEMORY(bytes) ...) by name, leaving out the
// header and the lines whose figures are <unknown>.
func parseTop(out string) map[string]topFigures {
	figures := map[string]topFigures{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 {
		return figures
	}
	header := strings.Fields(lines[0])
	memCol := -1
	for i, h := range header {
		if h == "MEMORY(bytes)" {
			memCol = i
		}
	}
	if len(header) < 3 || header[1] != "CPU(cores)" || memCol < 0 {
		return figures
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) <= memCol {
			continue
		}
		cpu, err1 := resource.ParseQuantity(f[1])
		memory, err2 := resource.ParseQuantity(f[memCol])
		if err1 == nil && err2 == nil {
			figures[f[0]] = topFigures{cpu: cpu, memory: memory}
		}
	}
	return figures
}
