package podnet

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A message built by nlBuilder parses back to what went in, nested
// attributes included.
func TestNetlinkMessageRoundTrip(t *testing.T) {
	var m nlBuilder
	m.ifInfo(unix.AF_UNSPEC, 7, unix.IFF_UP, unix.IFF_UP)
	m.attrString(unix.IFLA_IFNAME, "pk0123456789abc")
	m.attrUint32(unix.IFLA_MASTER, 3)
	m.attrUint32(unix.IFLA_LINK, 9)
	m.nested(unix.IFLA_LINKINFO, func() {
		m.attrString(unix.IFLA_INFO_KIND, "veth")
		m.nested(unix.IFLA_INFO_DATA, func() { m.attr(vethInfoPeer, make([]byte, 5)) })
	})
	body := m.bytes()
	require.Zero(t, len(body)%4, "attributes are padded to 4 bytes")

	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	msg = append(msg, body...)
	putHeader(msg, nlHeader{length: uint32(len(msg)), typ: unix.RTM_NEWLINK, seq: 42, port: 5})
	msgs, err := parseMessages(append(msg, msg...))
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, uint32(42), msgs[1].header.seq)
	l, err := parseLink(msgs[0])
	require.NoError(t, err)
	assert.Equal(t, link{index: 7, name: "pk0123456789abc", kind: "veth", master: 3, peer: 9, flags: unix.IFF_UP}, l)
}

// The kernel's error answer becomes an error that is the errno and carries
// the kernel's text; a zero code is an acknowledgement.
func TestNetlinkAckError(t *testing.T) {
	require.NoError(t, ackError("op", 0, make([]byte, 4+unix.SizeofNlMsghdr)))

	// The kernel's text follows the echo of the request: its header only
	// (NLM_F_CAPPED), or the whole request.
	var ext nlBuilder
	ext.attrString(unix.NLMSGERR_ATTR_MSG, "Device with the same name exists")
	for _, c := range []struct {
		name  string
		flags uint16
		echo  int // bytes of the request after its header
	}{{"capped", unix.NLM_F_CAPPED, 0}, {"whole request", 0, 24}} {
		data := make([]byte, 4+unix.SizeofNlMsghdr+c.echo)
		binary.NativeEndian.PutUint32(data, errCode(unix.EEXIST))
		putHeader(data[4:], nlHeader{length: uint32(unix.SizeofNlMsghdr + 40)}) // the request's length, echoed or not
		if c.echo > 0 {
			putHeader(data[4:], nlHeader{length: uint32(unix.SizeofNlMsghdr + c.echo)})
		}
		err := ackError("create bridge x", c.flags|unix.NLM_F_ACK_TLVS, append(data, ext.bytes()...))
		require.ErrorIs(t, err, unix.EEXIST, c.name)
		assert.Equal(t, "podnet: create bridge x: file exists (Device with the same name exists)", err.Error(), c.name)
	}

	require.Error(t, ackError("op", 0, []byte{1}))
	var nl *nlError
	require.True(t, errors.As(doneError("dump", binary.NativeEndian.AppendUint32(nil, errCode(unix.EINTR))), &nl))
	assert.Equal(t, unix.EINTR, nl.errno)
}

// The kernel's own error text reaches the error (extended acks), and the
// errno stays testable.
func TestNetlinkKernelError(t *testing.T) {
	requireNetAdmin(t)
	c, err := openNetlink()
	require.NoError(t, err)
	defer c.close()
	err = c.setUp(link{index: 1 << 30, name: "nonexistent"}, 0)
	require.ErrorIs(t, err, unix.ENODEV)
	_, err = c.linkByName("pkt-no-such")
	require.ErrorIs(t, err, unix.ENODEV)
	var m nlBuilder
	m.ifInfo(unix.AF_UNSPEC, 0, 0, 0)
	m.attrString(unix.IFLA_IFNAME, "pkt-kind")
	m.nested(unix.IFLA_LINKINFO, func() { m.attrString(unix.IFLA_INFO_KIND, "no-such-kind") })
	_, err = c.do("create link", unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, m.bytes())
	require.ErrorIs(t, err, unix.EOPNOTSUPP)
	require.ErrorContains(t, err, "(Unknown device type)")
}

// errCode is how the kernel writes errno e into an answer: negated.
func errCode(e unix.Errno) uint32 {
	code := -int32(e)
	return uint32(code)
}

// Whatever the bytes, parsing returns an error or a value, never a panic.
func FuzzParseNetlink(f *testing.F) {
	var m nlBuilder
	m.ifInfo(unix.AF_UNSPEC, 1, 0, 0)
	m.attrString(unix.IFLA_IFNAME, "eth0")
	m.nested(unix.IFLA_LINKINFO, func() { m.attrString(unix.IFLA_INFO_KIND, "veth") })
	msg := make([]byte, unix.SizeofNlMsghdr)
	msg = append(msg, m.bytes()...)
	putHeader(msg, nlHeader{length: uint32(len(msg)), typ: unix.RTM_NEWLINK})
	f.Add(msg)
	f.Add([]byte{})
	f.Add(make([]byte, 20))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := parseMessages(b)
		if err != nil {
			return
		}
		for _, msg := range msgs {
			_, _ = parseLink(msg)
			_ = ackError("fuzz", msg.header.flags, msg.data)
			_ = doneError("fuzz", msg.data)
			_, _ = parseAttrs(msg.data)
		}
	})
}
