package processruntime_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/internal/podrangetest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// A sandboxed pod sees the /etc/hosts, /etc/resolv.conf and /etc/hostname
// the runtime wrote for it: its address on the pod network named by its
// fully qualified name, its aliases, the cluster's resolver; a
// hostNetwork pod sees the host's.
func TestPodNameResolutionFiles(t *testing.T) {
	t.Parallel()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch corp.example\n"), 0o644))
	cidr := podrangetest.Range(t)
	bridge := podrangetest.Bridge(t, "pkd")
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{
		OnEvent: ev.add, PodCIDR: cidr, BridgeName: bridge, AllowHostAccess: true,
		ClusterDNS: []netip.Addr{netip.MustParseAddr("10.0.0.10")}, ClusterDomain: "cluster.local", ResolvConf: resolv,
	})
	t.Cleanup(func() { require.NoError(t, rt.TeardownNetwork(context.Background())) })

	const show = `cat /etc/hosts; echo ---; cat /etc/resolv.conf; echo ---; cat /etc/hostname; hostname`
	pod := shellPod(show + `; echo 10.9.9.9 mine >> /etc/hosts && echo hosts-writable`)
	pod.Namespace = "shop"
	pod.Spec.Hostname, pod.Spec.Subdomain = "db-1", "db"
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "192.0.2.10", Hostnames: []string{"foo.local", "bar.local"}}}
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Searches: []string{"extra.example"}, Options: []v1.PodDNSConfigOption{{Name: "edns0"}}}
	out := runToEnd(t, rt, ev, pod)
	st := status(t, rt, pod.UID)
	require.Len(t, st.PodIPs, 1)
	assert.Contains(t, out, "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
	assert.Contains(t, out, st.PodIPs[0]+"\tdb-1.db.shop.svc.cluster.local\tdb-1\n")
	assert.Contains(t, out, "# Entries added by HostAliases.\n192.0.2.10\tfoo.local\tbar.local\n")
	assert.Contains(t, out, "---\nsearch shop.svc.cluster.local svc.cluster.local cluster.local corp.example extra.example\nnameserver 10.0.0.10\noptions ndots:5 edns0\n---\n")
	assert.Contains(t, out, "---\ndb-1\ndb-1\n")
	assert.Contains(t, out, "hosts-writable", "the pod's root may change its own /etc/hosts, as on a kubelet")
	host, err := os.ReadFile("/etc/hosts")
	require.NoError(t, err)
	assert.NotContains(t, string(host), "mine", "the host's /etc/hosts is untouched")

	dflt := shellPod(show)
	dflt.Spec.DNSPolicy = v1.DNSDefault
	out = runToEnd(t, rt, ev, dflt)
	assert.Contains(t, out, "---\nsearch corp.example\nnameserver 192.0.2.53\n---\n", "Default: the host's resolver")

	hostNet := shellPod(show)
	hostNet.Spec.HostNetwork = true
	hostNet.Spec.HostAliases = pod.Spec.HostAliases
	out = runToEnd(t, rt, ev, hostNet)
	hostname, err := os.Hostname()
	require.NoError(t, err)
	assert.Contains(t, out, "# Kubernetes-managed hosts file (host network).\n"+string(host)+"\n# Entries added by HostAliases.\n")
	assert.Contains(t, out, "---\nsearch corp.example\nnameserver 192.0.2.53\n---\n", "ClusterFirst on the host network: the host's resolver")
	assert.Contains(t, out, "---\n"+hostname+"\n"+hostname+"\n")
}

// Without a cluster DNS server a ClusterFirst pod resolves as Default,
// and gets a MissingClusterDNS warning saying so.
func TestPodWithoutClusterDNSIsWarned(t *testing.T) {
	t.Parallel()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(resolv, []byte("nameserver 192.0.2.53\n"), 0o644))
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add, ResolvConf: resolv})
	out := runToEnd(t, rt, ev, shellPod(`cat /etc/resolv.conf`))
	assert.Equal(t, "nameserver 192.0.2.53\n", out)
	ev.wait(t, "the MissingClusterDNS warning", func(e processruntime.Event) bool {
		return e.Type == processruntime.PodWarning && e.Reason == processruntime.ReasonMissingClusterDNS
	})
}
