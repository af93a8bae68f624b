package podnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// The rtnetlink requests the package makes: links (get, list, create a
// bridge or a veth pair, bring up, set master, delete), IPv4 addresses
// (list, add, delete) and the default route.

// vethInfoPeer is VETH_INFO_PEER (linux/veth.h), which x/sys/unix lacks:
// the attribute of a veth's IFLA_INFO_DATA describing the peer, a struct
// ifinfomsg followed by the peer's own link attributes.
const vethInfoPeer = 1

// link is what the package reads of a network interface.
type link struct {
	index  int32
	name   string
	kind   string // IFLA_INFO_KIND: "bridge", "veth", or "" for a plain device
	master int32  // the index of the bridge it is a port of, or 0
	peer   int32  // IFLA_LINK: for a veth, its peer's index (in the peer's namespace)
	flags  uint32
}

func parseLink(m nlMessage) (link, error) {
	if len(m.data) < unix.SizeofIfInfomsg {
		return link{}, fmt.Errorf("podnet: link message cut short (%d bytes)", len(m.data))
	}
	ne := binary.NativeEndian
	l := link{
		index: int32(ne.Uint32(m.data[4:])),
		flags: ne.Uint32(m.data[8:]),
	}
	attrs, err := parseAttrs(m.data[unix.SizeofIfInfomsg:])
	if err != nil {
		return link{}, fmt.Errorf("podnet: link %d: %w", l.index, err)
	}
	l.name = attrs.string(unix.IFLA_IFNAME)
	if v, ok := attrs.uint32(unix.IFLA_MASTER); ok {
		l.master = int32(v)
	}
	if v, ok := attrs.uint32(unix.IFLA_LINK); ok {
		l.peer = int32(v)
	}
	if info, ok := attrs.get(unix.IFLA_LINKINFO); ok {
		if infos, err := parseAttrs(info); err == nil {
			l.kind = infos.string(unix.IFLA_INFO_KIND)
		}
	}
	return l, nil
}

// linkByName returns the link called name; the error wraps unix.ENODEV
// when there is none.
func (c *nlConn) linkByName(name string) (link, error) {
	var m nlBuilder
	m.ifInfo(unix.AF_UNSPEC, 0, 0, 0)
	m.attrString(unix.IFLA_IFNAME, name)
	msgs, err := c.do("get link "+name, unix.RTM_GETLINK, 0, m.bytes())
	if err != nil {
		return link{}, err
	}
	for _, msg := range msgs {
		if msg.header.typ == unix.RTM_NEWLINK {
			return parseLink(msg)
		}
	}
	return link{}, &nlError{op: "get link " + name, errno: unix.ENODEV}
}

// links lists every link of the socket's namespace.
func (c *nlConn) links() ([]link, error) {
	var m nlBuilder
	m.ifInfo(unix.AF_UNSPEC, 0, 0, 0)
	msgs, err := c.dump("list links", unix.RTM_GETLINK, m.bytes())
	if err != nil {
		return nil, err
	}
	ls := make([]link, 0, len(msgs))
	for _, msg := range msgs {
		if msg.header.typ != unix.RTM_NEWLINK {
			continue
		}
		l, err := parseLink(msg)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// addBridge creates a bridge with a fixed MAC address, so the bridge does
// not take its ports' addresses as they come and go (which would leave the
// pods' ARP caches pointing at a MAC the gateway no longer has).
func (c *nlConn) addBridge(name string, mac []byte, mtu int) error {
	var m nlBuilder
	m.ifInfo(unix.AF_UNSPEC, 0, 0, 0)
	m.attrString(unix.IFLA_IFNAME, name)
	m.attr(unix.IFLA_ADDRESS, mac)
	m.attrUint32(unix.IFLA_MTU, uint32(mtu))
	m.nested(unix.IFLA_LINKINFO, func() {
		m.attrString(unix.IFLA_INFO_KIND, "bridge")
	})
	_, err := c.do("create bridge "+name, unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, m.bytes())
	return err
}

// addVeth creates a veth pair in one request: the end called name in the
// socket's namespace, a port of the bridge master, and its peer called
// peerName in the namespace peerNetns (an open namespace file), so neither
// end ever exists half-placed or under a temporary name.
func (c *nlConn) addVeth(name string, master int32, mtu int, peerName string, peerNetns int) error {
	var m nlBuilder
	m.ifInfo(unix.AF_UNSPEC, 0, 0, 0)
	m.attrString(unix.IFLA_IFNAME, name)
	m.attrUint32(unix.IFLA_MASTER, uint32(master))
	m.attrUint32(unix.IFLA_MTU, uint32(mtu))
	m.nested(unix.IFLA_LINKINFO, func() {
		m.attrString(unix.IFLA_INFO_KIND, "veth")
		m.nested(unix.IFLA_INFO_DATA, func() {
			m.nested(vethInfoPeer, func() {
				m.ifInfo(unix.AF_UNSPEC, 0, 0, 0)
				m.attrString(unix.IFLA_IFNAME, peerName)
				m.attrUint32(unix.IFLA_MTU, uint32(mtu))
				m.attrUint32(unix.IFLA_NET_NS_FD, uint32(peerNetns))
			})
		})
	})
	_, err := c.do("create veth "+name, unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, m.bytes())
	return err
}

// setUp brings the link up, and makes it a port of master unless master is
// 0.
func (c *nlConn) setUp(l link, master int32) error {
	var m nlBuilder
	m.ifInfo(unix.AF_UNSPEC, l.index, unix.IFF_UP, unix.IFF_UP)
	if master != 0 {
		m.attrUint32(unix.IFLA_MASTER, uint32(master))
	}
	_, err := c.do("set link "+l.name+" up", unix.RTM_NEWLINK, 0, m.bytes())
	return err
}

// deleteLink deletes the link; deleting either end of a veth deletes both.
// A link already gone is not an error.
func (c *nlConn) deleteLink(l link) error {
	var m nlBuilder
	m.ifInfo(unix.AF_UNSPEC, l.index, 0, 0)
	_, err := c.do("delete link "+l.name, unix.RTM_DELLINK, 0, m.bytes())
	if errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
}

// address is an IPv4 address of a link, with its prefix length.
type address struct {
	index  int32
	prefix netip.Prefix // the address and its prefix length, not masked
}

// addresses lists the IPv4 addresses of every link of the namespace.
func (c *nlConn) addresses() ([]address, error) {
	var m nlBuilder
	m.ifAddr(unix.AF_INET, 0, 0, 0, 0)
	msgs, err := c.dump("list addresses", unix.RTM_GETADDR, m.bytes())
	if err != nil {
		return nil, err
	}
	var as []address
	for _, msg := range msgs {
		if msg.header.typ != unix.RTM_NEWADDR || len(msg.data) < unix.SizeofIfAddrmsg || msg.data[0] != unix.AF_INET {
			continue
		}
		bits := int(msg.data[1])
		index := int32(binary.NativeEndian.Uint32(msg.data[4:]))
		attrs, err := parseAttrs(msg.data[unix.SizeofIfAddrmsg:])
		if err != nil {
			return nil, fmt.Errorf("podnet: address of link %d: %w", index, err)
		}
		raw, ok := attrs.get(unix.IFA_LOCAL)
		if !ok {
			raw, ok = attrs.get(unix.IFA_ADDRESS)
		}
		ip, ipOK := netip.AddrFromSlice(raw)
		if !ok || !ipOK || !ip.Is4() {
			continue
		}
		as = append(as, address{index: index, prefix: netip.PrefixFrom(ip, bits)})
	}
	return as, nil
}

// addAddress gives link index the IPv4 address p (with the broadcast
// address of its prefix). An address already there is not an error.
func (c *nlConn) addAddress(index int32, p netip.Prefix) error {
	var m nlBuilder
	m.ifAddr(unix.AF_INET, uint8(p.Bits()), 0, unix.RT_SCOPE_UNIVERSE, uint32(index))
	m.attrAddr(unix.IFA_LOCAL, p.Addr())
	m.attrAddr(unix.IFA_ADDRESS, p.Addr())
	m.attrAddr(unix.IFA_BROADCAST, broadcast(p))
	_, err := c.do("add address "+p.String(), unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, m.bytes())
	return err
}

// deleteAddress removes the IPv4 address p from link index.
func (c *nlConn) deleteAddress(index int32, p netip.Prefix) error {
	var m nlBuilder
	m.ifAddr(unix.AF_INET, uint8(p.Bits()), 0, 0, uint32(index))
	m.attrAddr(unix.IFA_LOCAL, p.Addr())
	_, err := c.do("delete address "+p.String(), unix.RTM_DELADDR, 0, m.bytes())
	if errors.Is(err, unix.EADDRNOTAVAIL) {
		return nil
	}
	return err
}

// setDefaultRoute makes gateway, through link index, the namespace's IPv4
// default route, replacing any other.
func (c *nlConn) setDefaultRoute(index int32, gateway netip.Addr) error {
	var m nlBuilder
	m.rtMsg(unix.AF_INET, 0, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_UNIVERSE, unix.RTN_UNICAST)
	m.attrAddr(unix.RTA_GATEWAY, gateway)
	m.attrUint32(unix.RTA_OIF, uint32(index))
	_, err := c.do("set default route via "+gateway.String(), unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, m.bytes())
	return err
}
