package processruntime

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The rules of name resolution that need no machine: each dnsPolicy's
// resolv.conf, dnsConfig merged, the limits, and the hosts file.

const hostResolvConf = `# written by the host
nameserver 192.0.2.53
nameserver 192.0.2.54
search old.example
search corp.example lab.example.
options ndots:2 timeout:3
options attempts:4 ndots:1
`

func dnsPod(policy v1.DNSPolicy, hostNetwork bool) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", UID: "u1"},
		Spec:       v1.PodSpec{DNSPolicy: policy, HostNetwork: hostNetwork},
	}
}

func names(t *testing.T, clusterDNS ...string) nameResolution {
	t.Helper()
	path := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(path, []byte(hostResolvConf), 0o644))
	opts := Options{ClusterDomain: "cluster.local", ResolvConf: path}
	for _, s := range clusterDNS {
		opts.ClusterDNS = append(opts.ClusterDNS, netip.MustParseAddr(s))
	}
	n, err := newNameResolution(opts)
	require.NoError(t, err)
	return n
}

func resolvOf(t *testing.T, n nameResolution, pod *v1.Pod) (string, []reasonMessage) {
	t.Helper()
	c, warnings, err := n.podResolver(pod)
	require.NoError(t, err)
	return string(c.resolvConf()), warnings
}

func TestResolvConfPerDNSPolicy(t *testing.T) {
	withDNS := names(t, "10.0.0.10")
	const host = "search corp.example lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions ndots:1 timeout:3 attempts:4\n"
	const cluster = "search shop.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\nnameserver 10.0.0.10\noptions ndots:5\n"
	for _, tc := range []struct {
		name        string
		policy      v1.DNSPolicy
		hostNetwork bool
		want        string
	}{
		{"ClusterFirst", v1.DNSClusterFirst, false, cluster},
		{"unset is ClusterFirst", "", false, cluster},
		{"ClusterFirst with hostNetwork is Default", v1.DNSClusterFirst, true, host},
		{"ClusterFirstWithHostNet", v1.DNSClusterFirstWithHostNet, true, cluster},
		{"Default", v1.DNSDefault, false, host},
		{"None", v1.DNSNone, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings := resolvOf(t, withDNS, dnsPod(tc.policy, tc.hostNetwork))
			assert.Equal(t, tc.want, got)
			assert.Empty(t, warnings)
		})
	}

	t.Run("ClusterFirst without a cluster DNS falls back to Default", func(t *testing.T) {
		got, warnings := resolvOf(t, names(t), dnsPod(v1.DNSClusterFirst, false))
		assert.Equal(t, host, got)
		require.Len(t, warnings, 1)
		assert.Equal(t, ReasonMissingClusterDNS, warnings[0].Reason)
		assert.Contains(t, warnings[0].Message, "web-0_shop(u1)")
	})

	t.Run("dnsConfig is added", func(t *testing.T) {
		pod := dnsPod(v1.DNSClusterFirst, false)
		pod.Spec.DNSConfig = &v1.PodDNSConfig{
			Nameservers: []string{"10.0.0.10", "192.0.2.99"},
			Searches:    []string{"extra.example", "svc.cluster.local"},
			Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: new("2")}, {Name: "edns0"}},
		}
		got, _ := resolvOf(t, withDNS, pod)
		assert.Equal(t, "search shop.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example extra.example\nnameserver 10.0.0.10\nnameserver 192.0.2.99\noptions ndots:2 edns0\n", got)
	})

	t.Run("None with dnsConfig", func(t *testing.T) {
		pod := dnsPod(v1.DNSNone, false)
		pod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []v1.PodDNSConfigOption{{Name: "rotate"}}}
		got, _ := resolvOf(t, withDNS, pod)
		assert.Equal(t, "search a.example\nnameserver 1.1.1.1\noptions rotate\n", got)
	})

	t.Run("beyond the limits is cut, with a warning", func(t *testing.T) {
		pod := dnsPod(v1.DNSNone, false)
		pod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"}}
		for i := range 40 {
			pod.Spec.DNSConfig.Searches = append(pod.Spec.DNSConfig.Searches, fmt.Sprintf("d%02d.%s.example", i, strings.Repeat("x", 60)))
		}
		c, warnings, err := withDNS.podResolver(pod)
		require.NoError(t, err)
		assert.Len(t, c.nameservers, MaxDNSNameservers)
		assert.LessOrEqual(t, len(c.searches), MaxDNSSearchPaths)
		assert.LessOrEqual(t, len(strings.Join(c.searches, " ")), MaxDNSSearchListChars)
		require.Len(t, warnings, 1)
		assert.Equal(t, ReasonDNSConfigForming, warnings[0].Reason)
		assert.Contains(t, warnings[0].Message, "192.0.2.4")
	})

	t.Run("the host's file is bounded and must exist", func(t *testing.T) {
		n := names(t)
		n.resolvConf = filepath.Join(t.TempDir(), "big")
		require.NoError(t, os.WriteFile(n.resolvConf, []byte(strings.Repeat("# pad\n", maxResolvConfSize/6+1)), 0o644))
		_, _, err := n.podResolver(dnsPod(v1.DNSDefault, false))
		assert.ErrorContains(t, err, "larger than")
		n.resolvConf = filepath.Join(t.TempDir(), "missing")
		_, _, err = n.podResolver(dnsPod(v1.DNSDefault, false))
		assert.ErrorContains(t, err, "host's resolver configuration")
		// None needs no host file.
		_, _, err = n.podResolver(dnsPod(v1.DNSNone, false))
		assert.NoError(t, err)
	})
}

func TestNameResolutionOptionsAreChecked(t *testing.T) {
	for _, opts := range []Options{
		{ClusterDomain: "Not_A_Domain"},
		{ClusterDNS: []netip.Addr{{}}},
		{ClusterDNS: []netip.Addr{netip.IPv4Unspecified()}},
		{ClusterDNS: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("10.0.0.4")}},
	} {
		_, err := newNameResolution(opts)
		assert.ErrorContains(t, err, "processruntime: Options.Cluster", "%+v", opts)
	}
	n, err := newNameResolution(Options{ClusterDomain: "cluster.local."})
	require.NoError(t, err)
	assert.Equal(t, "cluster.local", n.clusterDomain)
	assert.Equal(t, DefaultResolvConf, n.resolvConf)
}

func TestHostsFile(t *testing.T) {
	n := names(t)
	ips := []netip.Addr{netip.MustParseAddr("10.244.1.7")}
	const localhost = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"

	pod := dnsPod(v1.DNSClusterFirst, false)
	assert.Equal(t, hostsHeader+localhost+"10.244.1.7\tweb-0\n", string(n.hostsFile(pod, ips, nil)))

	// A StatefulSet's pod: hostname and subdomain (its headless Service).
	pod.Spec.Hostname, pod.Spec.Subdomain = "db-1", "db"
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "192.0.2.10", Hostnames: []string{"foo.local", "bar.local"}}}
	assert.Equal(t, hostsHeader+localhost+"10.244.1.7\tdb-1.db.shop.svc.cluster.local\tdb-1\n"+
		"\n# Entries added by HostAliases.\n192.0.2.10\tfoo.local\tbar.local\n", string(n.hostsFile(pod, ips, nil)))

	// Without a pod network: no address to name.
	assert.Equal(t, hostsHeader+localhost+"\n# Entries added by HostAliases.\n192.0.2.10\tfoo.local\tbar.local\n", string(n.hostsFile(pod, nil, nil)))

	// hostNetwork: the host's, and the aliases.
	host := dnsPod(v1.DNSDefault, true)
	host.Spec.HostAliases = pod.Spec.HostAliases
	assert.Equal(t, hostsHeaderHostNetwork+"127.0.0.1 localhost\n\n# Entries added by HostAliases.\n192.0.2.10\tfoo.local\tbar.local\n",
		string(n.hostsFile(host, ips, []byte("127.0.0.1 localhost\n"))))
}
