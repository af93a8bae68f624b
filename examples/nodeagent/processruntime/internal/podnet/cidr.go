package podnet

import (
	"encoding/binary"
	"net/netip"
)

// Address arithmetic of an IPv4 pod range: the network address, then the
// gateway, then the pods' addresses, then the broadcast address.

func addrToUint32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func uint32ToAddr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// gatewayOf is the first address after p's network address.
func gatewayOf(p netip.Prefix) netip.Addr {
	return p.Masked().Addr().Next()
}

// broadcast is the last address of p.
func broadcast(p netip.Prefix) netip.Addr {
	n := addrToUint32(p.Masked().Addr())
	return uint32ToAddr(n | (1<<(32-p.Bits()) - 1))
}

// podRange is the first and last address of p a pod may get.
func podRange(p netip.Prefix) (first, last netip.Addr) {
	return gatewayOf(p).Next(), broadcast(p).Prev()
}
