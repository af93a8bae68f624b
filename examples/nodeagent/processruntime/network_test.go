package processruntime_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(200 + rand.IntN(50)), byte(rand.IntN(256)), 0}), 24)
	bridge := fmt.Sprintf("pkl%06x", rand.IntN(1<<24))
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
