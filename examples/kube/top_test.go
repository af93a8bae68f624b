package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
)

// testKubectlTop: the real kubectl top node and top pod answer on the
// harness, from metrics-server (clustertest's Options.MetricsServer),
// which scrapes the podkit nodes' /metrics/resource: a line for the node
// and one for its pod, with CPU and memory.
func testKubectlTop(t *testing.T, h *harness) {
	node := h.pool(t, "top", 1)[0]
	ns := h.namespace(t, "top")
	pod := runSleepers(t, h.c.Admin(), ns, "svc", "top", 1)[0]
	ctx := testContextFor(t, clusterTimeout)
	start := time.Now()

	// metrics-server needs two scrapes (its resolution is 10 s) before it
	// has a rate of CPU use to serve.
	top := func(what string, args ...string) string {
		var out, errOut string
		err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
			var err error
			out, errOut, err = h.kubectl.try(t, args...)
			return err == nil, nil
		})
		require.NoError(t, err, "kubectl %s never answered; last: %s%s", strings.Join(args, " "), out, errOut)
		t.Logf("kubectl top %s answered %v after the pod ran", what, time.Since(start).Round(time.Millisecond))
		return out
	}
	out := top("node", "top", "node", node.Name())
	require.Contains(t, out, "CPU(cores)", "the header")
	requireTopLine(t, out, node.Name())

	out = top("pod", "top", "pod", "-n", ns)
	require.Contains(t, out, "MEMORY(bytes)", "the header")
	requireTopLine(t, out, pod.Name)
}

// requireTopLine checks that out has a line for name with a CPU value in
// millicores or cores and a memory value with a unit.
func requireTopLine(t *testing.T, out, name string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == name {
			require.Regexp(t, `^[0-9]+m?$`, f[1], "CPU of %s", name)
			require.Regexp(t, `^[0-9]+(Ki|Mi|Gi)$`, f[2], "memory of %s", name)
			return
		}
	}
	require.Failf(t, "no line for "+name, "kubectl top said:\n%s", out)
}

// testKubectlTop is not yet in TestCluster's scenarios: it needs the
// harness started with Options.MetricsServer, whose first build of
// metrics-server (minutes) does not fit the harness's start timeout; see
// the session report.
var _ = testKubectlTop
