package processruntime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// This file is the node's part of name resolution (see "Name resolution"
// in the package doc): each sandboxed pod's /etc/hosts, /etc/resolv.conf
// and /etc/hostname, written into the pod's directory at each start of its
// sandbox and bound over the host's in the pod's mount namespace.

// DefaultResolvConf is the host's resolver configuration a Runtime reads
// when Options.ResolvConf is empty.
const DefaultResolvConf = "/etc/resolv.conf"

// The bounds of a pod's resolver configuration, those of the API server's
// validation of dnsConfig: more nameservers or search domains, or a longer
// search line, than a resolver uses are cut, with a DNSConfigForming
// warning (as on a kubelet).
const (
	MaxDNSNameservers     = 3
	MaxDNSSearchPaths     = 32
	MaxDNSSearchListChars = 2048
)

// maxResolvConfSize bounds the host's resolv.conf the runtime reads; a
// larger one fails the pod's sandbox (FailedCreatePodSandBox says why).
const maxResolvConfSize = 1 << 20

// dnsDir, in a pod's directory, holds its name resolution files.
const dnsDir = "dns"

// The reasons of the warnings name resolution gives a pod, the kubelet's.
const (
	// ReasonMissingClusterDNS: the pod's dnsPolicy is ClusterFirst (or
	// ClusterFirstWithHostNet) but the runtime knows no cluster DNS
	// server (Options.ClusterDNS); it resolves as with Default.
	ReasonMissingClusterDNS = "MissingClusterDNS"
	// ReasonDNSConfigForming: the pod's resolver configuration had more
	// than a resolver uses, and was cut.
	ReasonDNSConfigForming = "DNSConfigForming"
)

// clusterFirstOptions are the resolver options of a pod resolving through
// the cluster DNS, as on a kubelet: names with fewer than five dots are
// tried with the search domains first.
var clusterFirstOptions = []string{"ndots:5"}

// nameResolution is the runtime's part of name resolution, from Options.
type nameResolution struct {
	clusterDNS    []netip.Addr
	clusterDomain string
	resolvConf    string
}

// newNameResolution checks the Options' ClusterDNS, ClusterDomain and
// ResolvConf.
func newNameResolution(opts Options) (nameResolution, error) {
	n := nameResolution{clusterDNS: slices.Clone(opts.ClusterDNS), clusterDomain: strings.TrimSuffix(opts.ClusterDomain, "."), resolvConf: opts.ResolvConf}
	if n.resolvConf == "" {
		n.resolvConf = DefaultResolvConf
	}
	for _, ip := range n.clusterDNS {
		if !ip.IsValid() || ip.IsUnspecified() {
			return n, fmt.Errorf("processruntime: Options.ClusterDNS has %q, not a server's address", ip)
		}
	}
	if len(n.clusterDNS) > MaxDNSNameservers {
		return n, fmt.Errorf("processruntime: Options.ClusterDNS has %d addresses; a resolver uses at most %d", len(n.clusterDNS), MaxDNSNameservers)
	}
	if n.clusterDomain != "" {
		if errs := validation.IsDNS1123Subdomain(n.clusterDomain); len(errs) > 0 {
			return n, fmt.Errorf("processruntime: Options.ClusterDomain %q: %s", opts.ClusterDomain, strings.Join(errs, "; "))
		}
	}
	return n, nil
}

// resolverConfig is the content of a resolv.conf.
type resolverConfig struct {
	nameservers, searches, options []string
}

// parseResolvConf reads a resolv.conf as a resolver does: nameserver
// lines add up, the last search line wins, options lines add to (and
// override by name) the options before them. At most maxResolvConfSize
// bytes.
func parseResolvConf(r io.Reader) (resolverConfig, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxResolvConfSize+1))
	if err != nil {
		return resolverConfig{}, err
	}
	if len(b) > maxResolvConfSize {
		return resolverConfig{}, fmt.Errorf("it is larger than %d bytes", maxResolvConfSize)
	}
	var c resolverConfig
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				return resolverConfig{}, errors.New("a nameserver line names no server")
			}
			c.nameservers = append(c.nameservers, fields[1])
		case "search", "domain":
			c.searches = nil
			for _, s := range fields[1:] {
				if s != "." {
					c.searches = append(c.searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			c.options = mergeOptions(c.options, fields[1:])
		}
	}
	return c, nil
}

// mergeOptions adds options to base: an option of a name base has
// (ndots:2 over ndots:5) takes its place, others go at the end.
func mergeOptions(base, options []string) []string {
	out := slices.Clone(base)
	for _, o := range options {
		name, _, _ := strings.Cut(o, ":")
		if i := slices.IndexFunc(out, func(e string) bool { n, _, _ := strings.Cut(e, ":"); return n == name }); i >= 0 {
			out[i] = o
		} else {
			out = append(out, o)
		}
	}
	return out
}

// appendUnique appends to base what it does not have yet.
func appendUnique(base []string, more ...string) []string {
	out := slices.Clone(base)
	for _, s := range more {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// podResolver is pod's resolver configuration, as the kubelet forms it:
//
//   - None: only the pod's dnsConfig;
//   - ClusterFirst (not hostNetwork) and ClusterFirstWithHostNet: the
//     cluster DNS servers only, the search domains
//     <namespace>.svc.<domain>, svc.<domain>, <domain> before the host's,
//     ndots:5; without Options.ClusterDNS, as Default with a
//     MissingClusterDNS warning;
//   - Default, and ClusterFirst for a hostNetwork pod: the host's
//     (Options.ResolvConf);
//
// then the pod's dnsConfig added (nameservers and searches appended
// without repeats, options merged by name), and what a resolver would
// not use cut (MaxDNSNameservers, MaxDNSSearchPaths,
// MaxDNSSearchListChars, search domains longer than 253 bytes) with a
// DNSConfigForming warning.
func (n nameResolution) podResolver(pod *v1.Pod) (resolverConfig, []reasonMessage, error) {
	var warnings []reasonMessage
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	cluster := policy == v1.DNSClusterFirstWithHostNet || (policy == v1.DNSClusterFirst && !pod.Spec.HostNetwork)
	if cluster && len(n.clusterDNS) == 0 {
		warnings = append(warnings, reasonMessage{ReasonMissingClusterDNS, fmt.Sprintf("pod: %q. this node has no cluster DNS server configured and cannot create a pod using the %q policy; falling back to the %q policy", formatPod(pod), policy, v1.DNSDefault)})
		cluster = false
	}
	var c resolverConfig
	switch {
	case policy == v1.DNSNone:
	case policy != v1.DNSClusterFirst && policy != v1.DNSClusterFirstWithHostNet && policy != v1.DNSDefault:
		return c, nil, fmt.Errorf("unknown dnsPolicy %q", policy)
	default:
		f, err := os.Open(n.resolvConf)
		if err != nil {
			return c, nil, fmt.Errorf("reading the host's resolver configuration: %w", err)
		}
		c, err = parseResolvConf(f)
		f.Close()
		if err != nil {
			return c, nil, fmt.Errorf("reading the host's resolver configuration %s: %w", n.resolvConf, err)
		}
		if cluster {
			c.nameservers = nil
			for _, ip := range n.clusterDNS {
				c.nameservers = append(c.nameservers, ip.String())
			}
			if d := n.clusterDomain; d != "" {
				c.searches = appendUnique([]string{pod.Namespace + ".svc." + d, "svc." + d, d}, c.searches...)
			}
			c.options = slices.Clone(clusterFirstOptions)
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		c.nameservers = appendUnique(c.nameservers, dc.Nameservers...)
		c.searches = appendUnique(c.searches, dc.Searches...)
		var opts []string
		for _, o := range dc.Options {
			if o.Value != nil {
				opts = append(opts, o.Name+":"+*o.Value)
			} else {
				opts = append(opts, o.Name)
			}
		}
		c.options = mergeOptions(c.options, opts)
	}
	c, cut := c.fitLimits()
	if cut != "" {
		warnings = append(warnings, reasonMessage{ReasonDNSConfigForming, fmt.Sprintf("the pod's resolver configuration exceeds what a resolver uses: %s", cut)})
	}
	return c, warnings, nil
}

// fitLimits cuts c to what a resolver uses, and says what it cut.
func (c resolverConfig) fitLimits() (resolverConfig, string) {
	var cut []string
	if len(c.nameservers) > MaxDNSNameservers {
		cut = append(cut, fmt.Sprintf("nameservers beyond %d omitted (%s)", MaxDNSNameservers, strings.Join(c.nameservers[MaxDNSNameservers:], " ")))
		c.nameservers = c.nameservers[:MaxDNSNameservers]
	}
	searches := c.searches[:0:0]
	for _, s := range c.searches {
		if len(s) > validation.DNS1123SubdomainMaxLength {
			cut = append(cut, fmt.Sprintf("search domain of %d bytes omitted", len(s)))
			continue
		}
		searches = append(searches, s)
	}
	if len(searches) > MaxDNSSearchPaths {
		cut = append(cut, fmt.Sprintf("search domains beyond %d omitted", MaxDNSSearchPaths))
		searches = searches[:MaxDNSSearchPaths]
	}
	if len(strings.Join(searches, " ")) > MaxDNSSearchListChars {
		cut = append(cut, fmt.Sprintf("search domains beyond %d characters omitted", MaxDNSSearchListChars))
		for len(strings.Join(searches, " ")) > MaxDNSSearchListChars {
			searches = searches[:len(searches)-1]
		}
	}
	c.searches = searches
	return c, strings.Join(cut, "; ")
}

// resolvConf is c as a resolv.conf.
func (c resolverConfig) resolvConf() []byte {
	var b bytes.Buffer
	if len(c.searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(c.searches, " "))
	}
	for _, ns := range c.nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(c.options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(c.options, " "))
	}
	return b.Bytes()
}

// hostsHeader opens a hosts file the runtime writes.
const (
	hostsHeader            = "# Kubernetes-managed hosts file.\n"
	hostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
	hostAliasesHeader      = "\n# Entries added by HostAliases.\n"
)

// hostsFile is pod's /etc/hosts, as a kubelet writes it: for a
// hostNetwork pod, the host's (hostHosts) followed by the pod's
// hostAliases; otherwise the localhost names, a line per pod IP naming
// the pod's hostname (preceded by its fully qualified name, when it has a
// subdomain: <hostname>.<subdomain>.<namespace>.svc.<domain>), and the
// hostAliases.
func (n nameResolution) hostsFile(pod *v1.Pod, ips []netip.Addr, hostHosts []byte) []byte {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		b.WriteString(hostsHeaderHostNetwork)
		b.Write(hostHosts)
	} else {
		b.WriteString(hostsHeader)
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		host, domain := podHostname(pod), n.podDomain(pod)
		for _, ip := range ips {
			if domain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, host, domain, host)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, host)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString(hostAliasesHeader)
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes()
}

// podDomain is the domain of pod's fully qualified name,
// <subdomain>.<namespace>.svc.<domain> (without a cluster domain,
// <subdomain>.<namespace>.svc), or "" without a subdomain.
func (n nameResolution) podDomain(pod *v1.Pod) string {
	if pod.Spec.Subdomain == "" {
		return ""
	}
	d := pod.Spec.Subdomain + "." + pod.Namespace + ".svc"
	if n.clusterDomain != "" {
		d += "." + n.clusterDomain
	}
	return d
}

// maxHostsSize bounds the host's /etc/hosts a hostNetwork pod gets a copy
// of.
const maxHostsSize = 1 << 20

// nameFiles writes the pod's /etc/hosts, /etc/resolv.conf and
// /etc/hostname into its directory, owned by the pod's root (hostID) as a
// kubelet's are writable by the container's root, and returns the binds
// that show them in the pod's sandbox, with the warnings for the pod's
// events. ips are the pod's addresses (none without a pod network).
func (r *Runtime) nameFiles(p *podState, pod *v1.Pod, hostID uint32, ips []netip.Addr) ([]sandbox.Bind, []reasonMessage, error) {
	resolver, warnings, err := r.names.podResolver(pod)
	if err != nil {
		return nil, nil, err
	}
	var hostHosts []byte
	if pod.Spec.HostNetwork {
		if hostHosts, err = readAtMost("/etc/hosts", maxHostsSize); err != nil {
			return nil, nil, fmt.Errorf("reading the host's /etc/hosts: %w", err)
		}
	}
	dir := filepath.Join(p.dir, dnsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	files := []struct {
		name, target string
		content      []byte
	}{
		{"hosts", "/etc/hosts", r.names.hostsFile(pod, ips, hostHosts)},
		{"resolv.conf", "/etc/resolv.conf", resolver.resolvConf()},
		{"hostname", "/etc/hostname", []byte(podHostname(pod) + "\n")},
	}
	if pod.Spec.HostNetwork {
		// The host's name, as the UTS namespace the pod shares.
		name, err := os.Hostname()
		if err != nil {
			return nil, nil, err
		}
		files[2].content = []byte(name + "\n")
	}
	var binds []sandbox.Bind
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := writeOwned(path, f.content, hostID); err != nil {
			return nil, nil, err
		}
		binds = append(binds, sandbox.Bind{Source: path, Target: f.target})
	}
	return binds, warnings, nil
}

// writeOwned writes path whole (under a temporary name first), mode 0644,
// owned by host ID id.
func writeOwned(path string, content []byte, id uint32) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	if err := os.Chown(tmp, int(id), int(id)); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readAtMost reads path, an error when it is larger than limit bytes.
func readAtMost(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
