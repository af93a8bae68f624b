package podnet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

func checkPlatform() error { return nil }

// lockStateDir takes the state directory's lock file, or fails if another
// Network (another open file description, in this process or another)
// holds it.
func lockStateDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("podnet: state directory lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("podnet: state directory %s is in use by another Network", dir)
		}
		return nil, fmt.Errorf("podnet: state directory lock: %w", err)
	}
	return f, nil
}

// attachLocked does Attach's work; see there.
func (n *Network) attachLocked(ctx context.Context, uid types.UID, netnsPath string) (netip.Addr, error) {
	kept := n.NetnsPath(uid)
	if netnsPath == kept {
		netnsPath = ""
	}
	if netnsPath != "" {
		if err := isNetns(netnsPath); err != nil {
			return netip.Addr{}, err
		}
		if err := notHostNetns(netnsPath); err != nil {
			return netip.Addr{}, err
		}
		if err := n.notKeptForAnother(uid, netnsPath); err != nil {
			return netip.Addr{}, err
		}
	}
	host, err := openNetlink()
	if err != nil {
		return netip.Addr{}, err
	}
	defer host.close()
	bridge, err := n.ensureBridge(host)
	if err != nil {
		return netip.Addr{}, err
	}
	ip, err := n.ipam.allocate(uid)
	if err != nil {
		return netip.Addr{}, err
	}
	if err := ctx.Err(); err != nil {
		return netip.Addr{}, fmt.Errorf("podnet: attach pod %s: %w", uid, err)
	}
	if err := n.ensureKept(uid, netnsPath); err != nil {
		return netip.Addr{}, err
	}
	nsFD, err := unix.Open(kept, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("podnet: open network namespace of pod %s: %w", uid, err)
	}
	defer unix.Close(nsFD)
	var pod *nlConn
	if err := inNetns(nsFD, func() (err error) {
		pod, err = openNetlink()
		return err
	}); err != nil {
		return netip.Addr{}, fmt.Errorf("podnet: attach pod %s: %w", uid, err)
	}
	defer pod.close()
	if err := n.ensureVeth(host, pod, bridge, uid, nsFD); err != nil {
		return netip.Addr{}, fmt.Errorf("podnet: attach pod %s: %w", uid, err)
	}
	if err := ctx.Err(); err != nil {
		return netip.Addr{}, fmt.Errorf("podnet: attach pod %s: %w", uid, err)
	}
	if err := n.configurePod(pod, ip); err != nil {
		return netip.Addr{}, fmt.Errorf("podnet: attach pod %s: %w", uid, err)
	}
	return ip, nil
}

// ensureKept makes NetnsPath(uid) a kept namespace: netnsPath's, or, when
// it is "", the one kept already or a new one. (A pod moving to another
// namespace keeps its old veth pair until ensureVeth finds it is not in
// the new one and makes it again.)
func (n *Network) ensureKept(uid types.UID, netnsPath string) error {
	kept := n.NetnsPath(uid)
	if isKept(kept) {
		if netnsPath == "" {
			return nil
		}
		want, err := netnsID(netnsPath)
		if err != nil {
			return fmt.Errorf("podnet: network namespace %s: %w", netnsPath, err)
		}
		if have, err := netnsID(kept); err == nil && have == want {
			return nil
		}
	}
	if err := unkeepNetns(kept); err != nil {
		return err
	}
	if netnsPath != "" {
		return keepNetns(netnsPath, kept)
	}
	return inNewNetns(func() error { return keepThreadNetns(kept) })
}

// notHostNetns refuses the agent's own network namespace: attaching it
// would reconfigure the host's eth0 and default route. A hostNetwork pod
// is not attached at all.
func notHostNetns(netnsPath string) error {
	want, err := netnsID(netnsPath)
	if err != nil {
		return fmt.Errorf("podnet: network namespace %s: %w", netnsPath, err)
	}
	host, err := netnsID("/proc/self/ns/net")
	if err != nil {
		return fmt.Errorf("podnet: the host's network namespace: %w", err)
	}
	if want == host {
		return fmt.Errorf("podnet: %s is the host's network namespace; a pod on the host's network is not attached", netnsPath)
	}
	return nil
}

// notKeptForAnother refuses a namespace another pod has: attaching it
// would take that pod's eth0.
func (n *Network) notKeptForAnother(uid types.UID, netnsPath string) error {
	want, err := netnsID(netnsPath)
	if err != nil {
		return fmt.Errorf("podnet: network namespace %s: %w", netnsPath, err)
	}
	others, err := n.keptUIDsLocked()
	if err != nil {
		return err
	}
	for _, other := range others {
		if other == uid || !isKept(n.NetnsPath(other)) {
			continue
		}
		if have, err := netnsID(n.NetnsPath(other)); err == nil && have == want {
			return fmt.Errorf("podnet: network namespace %s is pod %s's; each pod needs one of its own", netnsPath, other)
		}
	}
	return nil
}

// ensureBridge returns the node's bridge, created if missing, up, with the
// gateway address, and turns on forwarding if Options.IPForward asks.
func (n *Network) ensureBridge(host *nlConn) (link, error) {
	name := n.opts.BridgeName
	br, err := host.linkByName(name)
	if errors.Is(err, unix.ENODEV) {
		err = host.addBridge(name, bridgeMAC(name), n.opts.MTU)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return link{}, err
		}
		br, err = host.linkByName(name)
	}
	if err != nil {
		return link{}, err
	}
	if br.kind != "bridge" {
		return link{}, fmt.Errorf("podnet: link %s exists and is not a bridge (kind %q); choose another BridgeName", name, br.kind)
	}
	if err := n.checkBridgeAddresses(host, br); err != nil {
		return link{}, err
	}
	if err := host.addAddress(br.index, netip.PrefixFrom(n.gateway, n.opts.PodCIDR.Bits())); err != nil {
		return link{}, err
	}
	if br.flags&unix.IFF_UP == 0 {
		if err := host.setUp(br, 0); err != nil {
			return link{}, err
		}
	}
	if n.opts.IPForward {
		if err := n.enableIPForward(); err != nil {
			return link{}, err
		}
	}
	return br, nil
}

// checkBridgeAddresses refuses a pod range that another interface's
// address overlaps, or a bridge with an address outside the range: either
// means another node (or the host) uses the range or the bridge, and
// attaching would break both.
func (n *Network) checkBridgeAddresses(host *nlConn, br link) error {
	addrs, err := host.addresses()
	if err != nil {
		return err
	}
	if err := n.foreignBridgeAddress(addrs, br); err != nil {
		return err
	}
	cidr := n.opts.PodCIDR
	for _, a := range addrs {
		if a.index != br.index && a.prefix.Masked().Overlaps(cidr) {
			return fmt.Errorf("podnet: pod range %s overlaps address %s of interface %d of the host", cidr, a.prefix, a.index)
		}
	}
	return nil
}

// foreignBridgeAddress returns an error if the bridge has an IPv4 address
// other than this network's gateway.
func (n *Network) foreignBridgeAddress(addrs []address, br link) error {
	gw := netip.PrefixFrom(n.gateway, n.opts.PodCIDR.Bits())
	for _, a := range addrs {
		if a.index == br.index && a.prefix != gw {
			return fmt.Errorf("podnet: bridge %s has address %s, not this network's gateway %s: another node uses the bridge, or the pod range changed (delete the bridge)", n.opts.BridgeName, a.prefix, gw)
		}
	}
	return nil
}

// ownBridge returns the bridge if there is one (ok false otherwise) and it
// is this network's: a bridge with no IPv4 address but the gateway. Sweep
// and Teardown touch only such a bridge and its ports, so a Network
// configured with another node's bridge name cannot take that node down.
func (n *Network) ownBridge(host *nlConn) (br link, ok bool, err error) {
	br, err = host.linkByName(n.opts.BridgeName)
	if errors.Is(err, unix.ENODEV) {
		return link{}, false, nil
	}
	if err != nil {
		return link{}, false, err
	}
	if br.kind != "bridge" {
		return link{}, false, fmt.Errorf("podnet: link %s is not a bridge (kind %q); left alone", n.opts.BridgeName, br.kind)
	}
	addrs, err := host.addresses()
	if err != nil {
		return link{}, false, err
	}
	if err := n.foreignBridgeAddress(addrs, br); err != nil {
		return link{}, false, fmt.Errorf("%w; left alone", err)
	}
	return br, true, nil
}

// bridgeMAC is a locally administered unicast MAC address derived from the
// bridge's name, the same in every run.
func bridgeMAC(name string) []byte {
	sum := sha256.Sum256([]byte("podnet bridge " + name))
	mac := sum[:6]
	mac[0] = mac[0]&^0x01 | 0x02
	return mac
}

const ipForwardPath = "/proc/sys/net/ipv4/ip_forward"

func (n *Network) enableIPForward() error {
	b, err := os.ReadFile(ipForwardPath)
	if err != nil {
		return fmt.Errorf("podnet: IPForward: %w", err)
	}
	if strings.TrimSpace(string(b)) == "1" {
		return nil
	}
	if err := os.WriteFile(ipForwardPath, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("podnet: IPForward: %w", err)
	}
	n.log.Info("Turned on IPv4 forwarding for the host (Options.IPForward)", "sysctl", "net.ipv4.ip_forward")
	return nil
}

// ensureVeth makes the pod's veth pair: the host's end on the bridge and
// up, eth0 in the pod's namespace. A pair that is there and whole is
// kept; anything else of the pod's is deleted and made again.
func (n *Network) ensureVeth(host, pod *nlConn, bridge link, uid types.UID, nsFD int) error {
	name := vethName(n.opts.BridgeName, uid)
	hostEnd, err := host.linkByName(name)
	found := err == nil
	if err != nil && !errors.Is(err, unix.ENODEV) {
		return err
	}
	if found && hostEnd.kind != "veth" {
		return fmt.Errorf("podnet: link %s exists and is not a veth (kind %q)", name, hostEnd.kind)
	}
	podEnd, err := pod.linkByName(podIfName)
	podFound := err == nil
	if err != nil && !errors.Is(err, unix.ENODEV) {
		return err
	}
	if found && !(podFound && podEnd.kind == "veth" && podEnd.peer == hostEnd.index && hostEnd.peer == podEnd.index) {
		// Not a pair of this pod's namespace: start again.
		if err := host.deleteLink(hostEnd); err != nil {
			return err
		}
		found = false
		podEnd, err = pod.linkByName(podIfName)
		podFound = err == nil
		if err != nil && !errors.Is(err, unix.ENODEV) {
			return err
		}
	}
	if !found {
		if podFound {
			if podEnd.kind != "veth" {
				return fmt.Errorf("podnet: the pod's namespace has an %s that is not a veth (kind %q)", podIfName, podEnd.kind)
			}
			if err := pod.deleteLink(podEnd); err != nil {
				return err
			}
		}
		if err := host.addVeth(name, bridge.index, n.opts.MTU, podIfName, nsFD); err != nil {
			return err
		}
		if hostEnd, err = host.linkByName(name); err != nil {
			return err
		}
	}
	if hostEnd.master != bridge.index || hostEnd.flags&unix.IFF_UP == 0 {
		return host.setUp(hostEnd, bridge.index)
	}
	return nil
}

// configurePod sets the inside of the pod's namespace up: lo and eth0 up,
// ip on eth0 (and no other IPv4 address), the default route via the
// gateway.
func (n *Network) configurePod(pod *nlConn, ip netip.Addr) error {
	lo, err := pod.linkByName("lo")
	if err != nil {
		return err
	}
	if err := pod.setUp(lo, 0); err != nil {
		return err
	}
	eth, err := pod.linkByName(podIfName)
	if err != nil {
		return err
	}
	if err := pod.setUp(eth, 0); err != nil {
		return err
	}
	want := netip.PrefixFrom(ip, n.opts.PodCIDR.Bits())
	addrs, err := pod.addresses()
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a.index == eth.index && a.prefix != want {
			if err := pod.deleteAddress(eth.index, a.prefix); err != nil {
				return err
			}
		}
	}
	if err := pod.addAddress(eth.index, want); err != nil {
		return err
	}
	return pod.setDefaultRoute(eth.index, n.gateway)
}

// detachLocked does Detach's work; see there.
func (n *Network) detachLocked(uid types.UID) error {
	host, err := openNetlink()
	if err != nil {
		return err
	}
	defer host.close()
	if err := n.deleteVeth(host, uid); err != nil {
		return fmt.Errorf("podnet: detach pod %s: %w", uid, err)
	}
	if err := unkeepNetns(n.NetnsPath(uid)); err != nil {
		return fmt.Errorf("podnet: detach pod %s: %w", uid, err)
	}
	if err := n.ipam.release(uid); err != nil {
		return fmt.Errorf("podnet: detach pod %s: %w", uid, err)
	}
	return nil
}

// deleteVeth deletes the pod's veth pair, if there is one.
func (n *Network) deleteVeth(host *nlConn, uid types.UID) error {
	name := vethName(n.opts.BridgeName, uid)
	l, err := host.linkByName(name)
	if errors.Is(err, unix.ENODEV) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.kind != "veth" {
		return fmt.Errorf("podnet: link %s is not a veth (kind %q); left alone", name, l.kind)
	}
	return host.deleteLink(l)
}

// sweepStraysLocked removes what belongs to no pod of the IPAM: veths of
// the package's naming on the bridge, stray allocation files, temporary
// files, and namespace directory entries that name no valid UID.
func (n *Network) sweepStraysLocked() error {
	var errs []error
	for _, ip := range n.ipam.strays() {
		if err := n.ipam.releaseAddr(ip); err != nil {
			errs = append(errs, err)
			continue
		}
		n.log.Info("Swept a stray IP allocation", "ip", ip, "bridge", n.opts.BridgeName)
	}
	errs = append(errs, n.ipam.removeTemps())
	if entries, err := os.ReadDir(n.netnsDir); err != nil {
		errs = append(errs, fmt.Errorf("podnet: namespace directory: %w", err))
	} else {
		for _, e := range entries {
			if checkUID(types.UID(e.Name())) != nil {
				errs = append(errs, unkeepNetns(filepath.Join(n.netnsDir, e.Name())))
			}
		}
	}
	errs = append(errs, n.sweepVethsLocked())
	return errors.Join(errs...)
}

// sweepVethsLocked deletes the veths on the bridge that have the package's
// naming and belong to no pod holding an address.
func (n *Network) sweepVethsLocked() error {
	return n.withOwnBridge(func(host *nlConn, br link) error {
		owned := map[string]bool{}
		for _, uid := range n.ipam.owners() {
			owned[vethName(n.opts.BridgeName, uid)] = true
		}
		links, err := host.links()
		if err != nil {
			return err
		}
		var errs []error
		for _, l := range links {
			if l.master != br.index || l.kind != "veth" || !isVethName(l.name) || owned[l.name] {
				continue
			}
			if err := host.deleteLink(l); err != nil {
				errs = append(errs, err)
				continue
			}
			n.log.Info("Swept a veth of no known pod", "link", l.name, "bridge", n.opts.BridgeName)
		}
		return errors.Join(errs...)
	})
}

// deleteBridgeLocked deletes the bridge, if there is one.
func (n *Network) deleteBridgeLocked() error {
	return n.withOwnBridge(func(host *nlConn, br link) error {
		return host.deleteLink(br)
	})
}

// withOwnBridge calls fn with a host socket and the bridge, if there is
// one and it is this network's (see ownBridge).
func (n *Network) withOwnBridge(fn func(host *nlConn, br link) error) error {
	host, err := openNetlink()
	if err != nil {
		return err
	}
	defer host.close()
	br, ok, err := n.ownBridge(host)
	if !ok {
		return err // no bridge (nil), or not ours
	}
	return fn(host, br)
}
