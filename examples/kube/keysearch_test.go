package kube_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testKeySearch is issue 20's first attack, on the cluster itself: a pod
// of an ordinary user walks up from its working directory, lists the
// cluster's directory (the control plane's PKI, the administrator's
// kubeconfig, the nodes' state) and searches the filesystem it sees for
// keys and kubeconfigs, printing what it reads to its log. None of the
// cluster's secrets is in the log: the sandbox gives the pod a /tmp of
// its own (the cluster lives in the host's), hides the agent's state and
// credentials, and maps the pod's root to an unprivileged host uid.
func testKeySearch(t *testing.T, h *harness) {
	nodes := h.sandboxedPool(t, "keysearch", 1)
	ns := h.namespace(t, "keysearch")
	admin := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)
	dir := h.c.Dir()
	stateDir := nodes[0].StateDir()
	pod := poolPod(ns, "keysearch", "attacker", strings.Join([]string{
		`cd ../../..; echo "walked up to $(pwd)"`,
		`ls -la ` + dir + ` ` + dir + `/control-plane/pki ` + stateDir + ` 2>&1 | head -20`,
		`cat ` + dir + `/control-plane/pki/sa.key ` + dir + `/control-plane/admin.kubeconfig 2>&1 | head -5`,
		`find / -xdev \( -path /proc -o -path /sys -o -path /usr -o -path /work \) -prune -o \( -name '*.key' -o -name '*kubeconfig*' \) -print 2>/dev/null > /tmp/found`,
		`echo "found $(wc -l < /tmp/found) files"; while read f; do cat "$f" 2>/dev/null; done < /tmp/found; echo done`,
	}, "; "))
	_, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitSucceeded(t, h, ns, pod.Name)
	out := podLog(t, h, ns, pod.Name)
	t.Logf("the attacker's log (%d bytes), first lines:\n%s", len(out), firstLines(out, 20))
	require.True(t, strings.HasSuffix(out, "done\n"), "the search ran to its end")

	// Every secret of the cluster, by a line of its content.
	var secrets []string
	for _, f := range []string{"control-plane/pki/sa.key", "control-plane/pki/ca.key", "control-plane/pki/apiserver.key", "control-plane/pki/apiserver-kubelet-client.key", "control-plane/pki/metrics-server.key"} {
		secrets = append(secrets, keyLine(t, filepath.Join(dir, f)))
	}
	for i, s := range secrets {
		assert.NotContains(t, out, s, "the pod read secret %d of the cluster", i)
	}
	kubeconfig, err := os.ReadFile(h.c.Kubeconfig())
	require.NoError(t, err)
	_, key, ok := strings.Cut(string(kubeconfig), "client-key-data: ")
	require.True(t, ok, "the administrator's kubeconfig has a client key")
	assert.NotContains(t, out, key[:40], "the pod read the administrator's client key")
}

// keyLine returns the second line of the PEM file path: base64 of the
// key, unique to it.
func keyLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	require.Greater(t, len(lines), 2, "%s is a PEM file", path)
	return lines[1]
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
