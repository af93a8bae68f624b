package podnet

import (
	"fmt"
	"net/netip"

	"github.com/go-logr/logr"
)

// Options configure a Network. StateDir and PodCIDR are required; every
// other field says what it defaults to.
type Options struct {
	// StateDir holds the network's state: one file per allocated IP and
	// one kept namespace file per attached pod. It is created if missing,
	// must be this Network's own (one Network at a time may use it: New
	// fails while another holds it), and must outlive the agent, so a
	// restarted agent keeps each pod's IP and namespace. Required.
	StateDir string
	// PodCIDR is the node's pod range, an IPv4 network address such as
	// 10.88.0.0/24: its first address is the gateway (the bridge's
	// address), the rest but the broadcast address go to pods. Its prefix
	// length must be 16 to 30 (at most 65,533 pods, at least one). It must
	// not overlap an address of another interface of the host, nor another
	// node's range. Required.
	PodCIDR netip.Prefix
	// BridgeName is the name of the node's bridge on the host. Each
	// Network on one host needs a name of its own (several in-process
	// nodes: podkit0, podkit1, ...). At most 15 bytes of letters, digits,
	// '-', '_' and '.'. Defaults to "podkit0".
	BridgeName string
	// MTU is the MTU of the bridge and of every pod's veth pair. Defaults
	// to 1500; it must be 68 to 65535.
	MTU int
	// IPForward, if true, makes Attach turn on IPv4 forwarding for the
	// whole host (net.ipv4.ip_forward = 1) when it is off, and log that it
	// did. It is needed for traffic between two bridges of one host (pods
	// of two nodes run by one process) and for any routing beyond the host
	// set up by someone else; it is never turned off again, since other
	// software may rely on it by then. Defaults to false: the package then
	// writes no sysctl of the host.
	IPForward bool
	// Logger gets what Sweep removes and IPForward changes at level 0, and
	// each attach and detach at V(4). Defaults to the zero Logger, which
	// discards.
	Logger logr.Logger
}

const (
	defaultBridgeName = "podkit0"
	defaultMTU        = 1500
	minMTU, maxMTU    = 68, 65535
	// minPrefixBits bounds the range (and so the IPAM's search for a free
	// address and its directory) to 65,533 pods; maxPrefixBits leaves room
	// for a gateway and one pod.
	minPrefixBits, maxPrefixBits = 16, 30
	// maxIfNameLen is IFNAMSIZ less its NUL.
	maxIfNameLen = 15
)

// complete checks o and fills in its defaults. o is the caller's copy.
func (o *Options) complete() error {
	if o.StateDir == "" {
		return fmt.Errorf("podnet: StateDir is empty; want a directory of this network's own")
	}
	if err := checkPodCIDR(o.PodCIDR); err != nil {
		return err
	}
	if o.BridgeName == "" {
		o.BridgeName = defaultBridgeName
	}
	if err := checkIfName(o.BridgeName); err != nil {
		return fmt.Errorf("podnet: BridgeName: %w", err)
	}
	if isVethName(o.BridgeName) {
		return fmt.Errorf("podnet: BridgeName %q looks like the name of a pod's veth (pk and 13 hex digits); choose another", o.BridgeName)
	}
	if o.MTU == 0 {
		o.MTU = defaultMTU
	}
	if o.MTU < minMTU || o.MTU > maxMTU {
		return fmt.Errorf("podnet: MTU is %d; want %d to %d", o.MTU, minMTU, maxMTU)
	}
	return nil
}

func checkPodCIDR(p netip.Prefix) error {
	if !p.IsValid() {
		return fmt.Errorf("podnet: PodCIDR is not set; want the node's IPv4 pod range, such as 10.88.0.0/24")
	}
	if !p.Addr().Is4() {
		return fmt.Errorf("podnet: PodCIDR %s is not IPv4; only IPv4 pod ranges are supported", p)
	}
	if p.Bits() < minPrefixBits || p.Bits() > maxPrefixBits {
		return fmt.Errorf("podnet: PodCIDR %s has prefix length %d; want %d to %d", p, p.Bits(), minPrefixBits, maxPrefixBits)
	}
	if m := p.Masked(); m != p {
		return fmt.Errorf("podnet: PodCIDR %s is not a network address; want %s", p, m)
	}
	a := p.Addr()
	if a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() || a.As4()[0] == 0 || a.As4()[0] >= 240 {
		return fmt.Errorf("podnet: PodCIDR %s is not a unicast range pods can use (loopback, link-local, multicast, 0/8 and 240/4 are refused)", p)
	}
	return nil
}

// checkIfName checks a Linux interface name, more strictly than the
// kernel: only characters that need no quoting anywhere.
func checkIfName(name string) error {
	if len(name) > maxIfNameLen {
		return fmt.Errorf("%q is %d bytes; at most %d", name, len(name), maxIfNameLen)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%q is not an interface name", name)
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q has %q; want letters, digits, '-', '_' or '.'", name, c)
		}
	}
	return nil
}
