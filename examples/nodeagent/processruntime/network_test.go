package processruntime_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/internal/podrangetest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// A runtime opened without a pod range gets its network later, as an
// agent does once its Node has a spec.podCIDR: pods started after have an
// address of the range, and a second, different range is refused.
func TestStartNetworkAfterOpen(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add})
	assert.Contains(t, rt.Containment().Network, "loopback only")
	cidr := podrangetest.Range(t)
	bridge := podrangetest.Bridge(t, "pkl")
	require.NoError(t, rt.StartNetwork(cidr, bridge))
	t.Cleanup(func() { require.NoError(t, rt.TeardownNetwork(context.Background())) })
	require.NoError(t, rt.StartNetwork(cidr, bridge), "the same range again changes nothing")
	other := netip.MustParsePrefix("10.199.3.0/24")
	assert.ErrorContains(t, rt.StartNetwork(other, bridge), "processruntime: StartNetwork: the runtime's pod network is "+cidr.String())
	assert.ErrorContains(t, rt.StartNetwork(netip.Prefix{}, bridge), "no pod range")
	assert.Contains(t, rt.Containment().Network, "on bridge "+bridge)

	pod := shellPod(`cat /etc/hosts`)
	out := runToEnd(t, rt, ev, pod)
	st := status(t, rt, pod.UID)
	require.Len(t, st.PodIPs, 1)
	assert.True(t, cidr.Contains(netip.MustParseAddr(st.PodIPs[0])), "%s in %s", st.PodIPs[0], cidr)
	assert.Contains(t, out, st.PodIPs[0]+"\t"+pod.Name+"\n")
}

// RemoveNetwork, after the runtime closed and its pods' processes were
// killed from outside it, leaves no bridge, veth or kept namespace.
func TestRemoveNetworkAfterClose(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip(8) to check the network with")
	}
	stateDir := sandboxStateDir(t)
	require.NoError(t, processruntime.RemoveNetwork(context.Background(), stateDir), "nothing to remove")
	cidr := podrangetest.Range(t)
	bridge := podrangetest.Bridge(t, "pkm")
	rt := sandboxed(t, processruntime.Options{StateDir: stateDir, PodCIDR: cidr, BridgeName: bridge})
	pod := shellPod(`exec sleep 300`)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	st := status(t, rt, pod.UID)
	require.Len(t, st.PodIPs, 1)
	assert.ErrorContains(t, processruntime.RemoveNetwork(context.Background(), stateDir), "processruntime: RemoveNetwork", "the open runtime holds it")
	require.NoError(t, rt.Close())
	for _, p := range processes(t, pod.UID) {
		// One that ended since the scan (a shim done with its output) is
		// what the kill is for.
		if err := syscall.Kill(p.PID, syscall.SIGKILL); !errors.Is(err, syscall.ESRCH) {
			require.NoError(t, err)
		}
	}
	eventually(t, 10*time.Second, "the pod's processes are gone", func() bool { return len(processes(t, pod.UID)) == 0 })

	require.NoError(t, processruntime.RemoveNetwork(context.Background(), stateDir))
	out, _ := exec.Command("ip", "link", "show", bridge).CombinedOutput()
	assert.Contains(t, string(out), "does not exist", "the bridge is gone")
	kept, err := os.ReadDir(filepath.Join(stateDir, "network", "netns"))
	require.NoError(t, err)
	assert.Empty(t, kept, "no kept network namespace")
	// What an uninstaller does after the network: the pod's cgroups, which
	// no runtime will open stateDir again to remove, go too.
	require.NoError(t, processruntime.RemoveCgroups(stateDir))
	require.NoError(t, os.RemoveAll(stateDir), "the state directory can be removed")
}

// A runtime given another range than its state directory's network had
// refuses it while a pod runs on the old one, and replaces it once none
// does.
func TestAnotherRangeOnTheSameStateDirectory(t *testing.T) {
	t.Parallel()
	stateDir := sandboxStateDir(t)
	first := podrangetest.Range(t)
	second := podrangetest.Range(t)
	bridge := podrangetest.Bridge(t, "pka")
	rt := sandboxed(t, processruntime.Options{StateDir: stateDir, PodCIDR: first, BridgeName: bridge})
	pod := shellPod(`exec sleep 300`)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	require.NoError(t, rt.Close())

	_, err = processruntime.Open(processruntime.Options{StateDir: stateDir, PodCIDR: second, BridgeName: bridge})
	assert.ErrorContains(t, err, "with 1 running pods on it; it cannot become "+second.String())

	rt = sandboxed(t, processruntime.Options{StateDir: stateDir, PodCIDR: first, BridgeName: bridge})
	terminate(t, rt, pod, 1)
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
	require.NoError(t, rt.Close())
	rt = sandboxed(t, processruntime.Options{StateDir: stateDir, PodCIDR: second, BridgeName: bridge})
	t.Cleanup(func() { require.NoError(t, rt.TeardownNetwork(context.Background())) })
	next := shellPod(`exec sleep 300`)
	_, err = syncPod(rt, next)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, next, 1) })
	st := status(t, rt, next.UID)
	require.Len(t, st.PodIPs, 1)
	assert.True(t, second.Contains(netip.MustParseAddr(st.PodIPs[0])), "%s in %s", st.PodIPs[0], second)
}
