package podnet

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// The wire format of rtnetlink: messages of a 16-byte header and a body,
// bodies of a fixed struct followed by attributes (type-length-value,
// nestable), everything aligned to 4 bytes and in the host's byte order.

type nlHeader struct {
	length uint32
	typ    uint16
	flags  uint16
	seq    uint32
	port   uint32
}

type nlMessage struct {
	header nlHeader
	data   []byte // the body, after the header
}

func putHeader(b []byte, h nlHeader) {
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], h.length)
	ne.PutUint16(b[4:], h.typ)
	ne.PutUint16(b[6:], h.flags)
	ne.PutUint32(b[8:], h.seq)
	ne.PutUint32(b[12:], h.port)
}

func getHeader(b []byte) nlHeader {
	ne := binary.NativeEndian
	return nlHeader{
		length: ne.Uint32(b[0:]),
		typ:    ne.Uint16(b[4:]),
		flags:  ne.Uint16(b[6:]),
		seq:    ne.Uint32(b[8:]),
		port:   ne.Uint32(b[12:]),
	}
}

func align4(n int) int { return (n + 3) &^ 3 }

// parseMessages splits one read into its messages. The data of each
// message aliases b.
func parseMessages(b []byte) ([]nlMessage, error) {
	var msgs []nlMessage
	for len(b) > 0 {
		if len(b) < unix.SizeofNlMsghdr {
			return nil, fmt.Errorf("netlink message header cut short (%d bytes)", len(b))
		}
		h := getHeader(b)
		if h.length < unix.SizeofNlMsghdr || int(h.length) > len(b) {
			return nil, fmt.Errorf("netlink message length %d out of bounds (%d bytes left)", h.length, len(b))
		}
		msgs = append(msgs, nlMessage{header: h, data: b[unix.SizeofNlMsghdr:h.length]})
		b = b[min(align4(int(h.length)), len(b)):]
	}
	return msgs, nil
}

// nlAttr is one attribute; typ has the nested and byte-order flags cleared.
type nlAttr struct {
	typ  uint16
	data []byte
}

type nlAttrs []nlAttr

// parseAttrs splits b into attributes. Their data aliases b.
func parseAttrs(b []byte) (nlAttrs, error) {
	var attrs nlAttrs
	for len(b) > 0 {
		if len(b) < unix.SizeofRtAttr {
			return nil, fmt.Errorf("netlink attribute header cut short (%d bytes)", len(b))
		}
		n := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if n < unix.SizeofRtAttr || n > len(b) {
			return nil, fmt.Errorf("netlink attribute %d length %d out of bounds (%d bytes left)", typ, n, len(b))
		}
		attrs = append(attrs, nlAttr{typ: typ, data: b[unix.SizeofRtAttr:n]})
		b = b[min(align4(n), len(b)):]
	}
	return attrs, nil
}

func (as nlAttrs) get(typ uint16) ([]byte, bool) {
	for _, a := range as {
		if a.typ == typ {
			return a.data, true
		}
	}
	return nil, false
}

func (as nlAttrs) uint32(typ uint16) (uint32, bool) {
	d, ok := as.get(typ)
	if !ok || len(d) < 4 {
		return 0, false
	}
	return binary.NativeEndian.Uint32(d), true
}

func (as nlAttrs) string(typ uint16) string {
	d, _ := as.get(typ)
	return cString(d)
}

// cString is b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// nlBuilder builds a message body: a fixed struct, then attributes.
type nlBuilder struct {
	b []byte
}

func (m *nlBuilder) bytes() []byte { return m.b }

// ifInfo appends a struct ifinfomsg.
func (m *nlBuilder) ifInfo(family uint8, index int32, flags, change uint32) {
	var s [unix.SizeofIfInfomsg]byte
	s[0] = family
	ne := binary.NativeEndian
	ne.PutUint32(s[4:], uint32(index))
	ne.PutUint32(s[8:], flags)
	ne.PutUint32(s[12:], change)
	m.b = append(m.b, s[:]...)
}

// ifAddr appends a struct ifaddrmsg.
func (m *nlBuilder) ifAddr(family, prefixLen, flags, scope uint8, index uint32) {
	var s [unix.SizeofIfAddrmsg]byte
	s[0], s[1], s[2], s[3] = family, prefixLen, flags, scope
	binary.NativeEndian.PutUint32(s[4:], index)
	m.b = append(m.b, s[:]...)
}

// rtMsg appends a struct rtmsg.
func (m *nlBuilder) rtMsg(family, dstLen, table, protocol, scope, typ uint8) {
	var s [unix.SizeofRtMsg]byte
	s[0], s[1], s[4], s[5], s[6], s[7] = family, dstLen, table, protocol, scope, typ
	m.b = append(m.b, s[:]...)
}

func (m *nlBuilder) attr(typ uint16, data []byte) {
	n := unix.SizeofRtAttr + len(data)
	var h [unix.SizeofRtAttr]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(n))
	binary.NativeEndian.PutUint16(h[2:], typ)
	m.b = append(m.b, h[:]...)
	m.b = append(m.b, data...)
	m.b = append(m.b, make([]byte, align4(n)-n)...)
}

func (m *nlBuilder) attrString(typ uint16, s string) {
	m.attr(typ, append([]byte(s), 0))
}

func (m *nlBuilder) attrUint32(typ uint16, v uint32) {
	var d [4]byte
	binary.NativeEndian.PutUint32(d[:], v)
	m.attr(typ, d[:])
}

func (m *nlBuilder) attrAddr(typ uint16, a netip.Addr) {
	m.attr(typ, a.AsSlice())
}

// nested appends an attribute holding what fill appends. It does not set
// NLA_F_NESTED, as iproute2 does not: the kernel parses these attributes
// liberally, and veth's peer attribute starts with a struct, not with
// attributes.
func (m *nlBuilder) nested(typ uint16, fill func()) {
	start := len(m.b)
	m.attr(typ, nil)
	fill()
	binary.NativeEndian.PutUint16(m.b[start:], uint16(len(m.b)-start))
}
