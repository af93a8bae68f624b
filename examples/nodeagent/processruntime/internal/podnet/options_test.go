package podnet

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestOptionsComplete(t *testing.T) {
	valid := func() Options {
		return Options{StateDir: "/state", PodCIDR: netip.MustParsePrefix("10.88.0.0/24")}
	}
	o := valid()
	require.NoError(t, o.complete())
	assert.Equal(t, "podkit0", o.BridgeName)
	assert.Equal(t, 1500, o.MTU)

	for _, c := range []struct {
		name   string
		modify func(*Options)
		want   string
	}{
		{"no state dir", func(o *Options) { o.StateDir = "" }, "StateDir is empty"},
		{"no cidr", func(o *Options) { o.PodCIDR = netip.Prefix{} }, "PodCIDR is not set"},
		{"ipv6", func(o *Options) { o.PodCIDR = netip.MustParsePrefix("fd00::/64") }, "not IPv4"},
		{"too big", func(o *Options) { o.PodCIDR = netip.MustParsePrefix("10.0.0.0/8") }, "prefix length 8; want 16 to 30"},
		{"too small", func(o *Options) { o.PodCIDR = netip.MustParsePrefix("10.88.0.0/31") }, "prefix length 31"},
		{"not masked", func(o *Options) { o.PodCIDR = netip.MustParsePrefix("10.88.0.5/24") }, "want 10.88.0.0/24"},
		{"loopback", func(o *Options) { o.PodCIDR = netip.MustParsePrefix("127.1.0.0/24") }, "not a unicast range"},
		{"link-local", func(o *Options) { o.PodCIDR = netip.MustParsePrefix("169.254.1.0/24") }, "not a unicast range"},
		{"multicast", func(o *Options) { o.PodCIDR = netip.MustParsePrefix("224.1.0.0/24") }, "not a unicast range"},
		{"long bridge", func(o *Options) { o.BridgeName = "abcdefghijklmnop" }, "at most 15"},
		{"bridge slash", func(o *Options) { o.BridgeName = "a/b" }, `has '/'`},
		{"bridge dots", func(o *Options) { o.BridgeName = ".." }, "not an interface name"},
		{"bridge like veth", func(o *Options) { o.BridgeName = "pk0123456789abc" }, "looks like the name of a pod's veth"},
		{"mtu low", func(o *Options) { o.MTU = 67 }, "MTU is 67"},
		{"mtu high", func(o *Options) { o.MTU = 65536 }, "MTU is 65536"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := valid()
			c.modify(&o)
			err := o.complete()
			require.ErrorContains(t, err, c.want)
			require.True(t, strings.HasPrefix(err.Error(), "podnet: "), err.Error())
		})
	}
}

func TestVethName(t *testing.T) {
	a := vethName("podkit0", "0b7c5b8e-3a0b-4f6e-9d1c-6c1f2a9e8d70")
	assert.Len(t, a, maxIfNameLen)
	assert.True(t, isVethName(a))
	assert.Equal(t, a, vethName("podkit0", "0b7c5b8e-3a0b-4f6e-9d1c-6c1f2a9e8d70"), "stable")
	assert.NotEqual(t, a, vethName("podkit1", "0b7c5b8e-3a0b-4f6e-9d1c-6c1f2a9e8d70"), "one UID on two nodes")
	assert.False(t, isVethName("podkit0"))
	assert.False(t, isVethName("pk0123456789abg"))
}

func TestCheckUID(t *testing.T) {
	for _, ok := range []string{"0b7c5b8e-3a0b-4f6e-9d1c-6c1f2a9e8d70", "6d5ad2a4f1e3c1f0e1c2b3a4", "pod_1.x"} {
		assert.NoError(t, checkUID(types.UID(ok)), ok)
	}
	for _, bad := range []string{"", ".", "..", ".hidden", "a/b", "a b", strings.Repeat("a", 129)} {
		assert.Error(t, checkUID(types.UID(bad)), bad)
	}
}
