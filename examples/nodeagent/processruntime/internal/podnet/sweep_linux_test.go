package podnet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// A restarted agent's Sweep takes down the pods it no longer knows, and
// whatever no pod owns, and leaves the pods it keeps working.
func TestSweepRemovesLeftovers(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	n := newTestNetwork(t, testOptions(t))
	ips := map[types.UID]netip.Addr{}
	for _, uid := range []types.UID{"pod-keep", "pod-gone-1", "pod-gone-2"} {
		got, err := n.Attach(ctx, uid, "")
		require.NoError(t, err)
		ips[uid] = got[0]
	}
	// Left by a crash: a veth of the package's naming on the bridge that
	// no pod owns, an allocation file naming no pod, a half-written
	// allocation, a namespace file of no valid UID.
	stray := fmt.Sprintf("pk%013x", rand.Uint64()&(1<<52-1))
	out, err := exec.Command("ip", "link", "add", stray, "master", n.BridgeName(), "type", "veth", "peer", "name", stray[:13]+"p").CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", stray).Run() })
	garbage := filepath.Join(n.ipamDir, "10.255.255.254")
	require.NoError(t, os.WriteFile(garbage, []byte("not/a uid\n"), 0o600))
	temp := filepath.Join(n.ipamDir, tempPrefix+"123")
	require.NoError(t, os.WriteFile(temp, []byte("pod-x"), 0o600))
	badNetns := filepath.Join(n.netnsDir, ".bad")
	require.NoError(t, os.WriteFile(badNetns, nil, 0o400))

	m := reopen(t, n)
	// A keep that panics removes nothing.
	err = m.Sweep(ctx, func(types.UID) bool { panic("boom") })
	require.ErrorContains(t, err, "keep panicked")
	assert.Len(t, ports(t, m), 4)

	var asked []types.UID
	require.NoError(t, m.Sweep(ctx, func(uid types.UID) bool {
		asked = append(asked, uid)
		return uid == "pod-keep"
	}))
	assert.ElementsMatch(t, []types.UID{"pod-keep", "pod-gone-1", "pod-gone-2"}, asked)
	assert.Equal(t, []string{vethName(m.BridgeName(), "pod-keep")}, ports(t, m))
	for _, path := range []string{garbage, temp, badNetns, m.NetnsPath("pod-gone-1"), m.NetnsPath("pod-gone-2")} {
		assert.NoFileExists(t, path)
	}
	entries, err := os.ReadDir(m.ipamDir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, ips["pod-keep"].String(), entries[0].Name())

	// The kept pod still works, and keeps its address.
	serveIn(t, m.NetnsPath("pod-keep"), "0.0.0.0:80", "kept")
	requireReaches(t, "", netip.AddrPortFrom(ips["pod-keep"], 80), "kept")
	again, err := m.Attach(ctx, "pod-keep", "")
	require.NoError(t, err)
	assert.Equal(t, ips["pod-keep"], again[0])

	require.Error(t, m.Sweep(ctx, nil))
}

// Teardown leaves nothing of the network on the host; the Network can
// start again afterwards.
func TestTeardownLeavesNothing(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	opts := testOptions(t)
	n := newTestNetwork(t, opts)
	procNS, _ := procNetns(t, false)
	_, err := n.Attach(ctx, "pod-a", procNS)
	require.NoError(t, err)
	_, err = n.Attach(ctx, "pod-b", "")
	require.NoError(t, err)

	require.NoError(t, n.Teardown(ctx))
	require.NoError(t, n.Teardown(ctx), "again")
	requireHostClean(t, opts)
	assert.NotContains(t, ipIn(t, procNS, "-o", "link"), "eth0")

	ips, err := n.Attach(ctx, "pod-c", "")
	require.NoError(t, err)
	requirePodConfigured(t, n, n.NetnsPath("pod-c"), ips[0])
}
