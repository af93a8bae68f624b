// Package podrangetest gives tests that build pod networks on this host a
// pod range (a /24) and a bridge name no other test holds, in this process
// or in another one: go test runs packages in parallel processes, and two
// tests on one range see each other's bridge as the host's address.
//
// A claim is an exclusive flock(2) on a file under os.TempDir(), held
// until the test ends (and dropped by the kernel if the process dies, so
// a crashed run leaves nothing that blocks the next). A range that holds
// an address of one of the host's interfaces is never given.
package podrangetest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// First and Last bound the ranges given: 10.First.0.0/24 to
// 10.Last.255.0/24. Clusters of examples/kube/clustertest choose theirs
// in 10.64.0.0-10.191.255.255, apart from these.
const (
	First = 200
	Last  = 249
)

// Range returns a /24 no other test holds and no host interface has an
// address in, claimed until t ends. It fails t if none can be claimed.
// Any goroutine of t may call it.
func Range(t testing.TB) netip.Prefix {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "podkit-test-pod-ranges")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatalf("podrangetest: %v", err)
	}
	used := hostAddresses(t)
	n := (Last - First + 1) * 256
	for _, i := range rand.Perm(n) {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(First + i/256), byte(i % 256), 0}), 24)
		if holdsAny(p, used) {
			continue
		}
		if claim(t, filepath.Join(dir, p.Addr().String())) {
			return p
		}
	}
	t.Fatalf("podrangetest: every /24 of 10.%d.0.0 to 10.%d.255.0 is held or has a host address", First, Last)
	return netip.Prefix{}
}

// Bridge returns a bridge name (at most 15 bytes, as Linux wants) that
// starts with prefix (at most 6 bytes) and that no other test holds,
// claimed until t ends.
func Bridge(t testing.TB, prefix string) string {
	t.Helper()
	if len(prefix) > 6 {
		t.Fatalf("podrangetest: bridge prefix %q is longer than 6 bytes", prefix)
	}
	dir := filepath.Join(os.TempDir(), "podkit-test-bridges")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatalf("podrangetest: %v", err)
	}
	for range 100 {
		name := fmt.Sprintf("%s%06x", prefix, rand.IntN(1<<24))
		if _, err := net.InterfaceByName(name); err == nil {
			continue
		}
		if claim(t, filepath.Join(dir, name)) {
			return name
		}
	}
	t.Fatalf("podrangetest: no free bridge name with prefix %q in 100 tries", prefix)
	return ""
}

// claim takes an exclusive, non-blocking flock on path and keeps it until
// t ends; it reports whether the lock was free.
func claim(t testing.TB, path string) bool {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("podrangetest: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	t.Cleanup(func() { f.Close() })
	return true
}

func hostAddresses(t testing.TB) []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("podrangetest: listing the host's addresses: %v", err)
	}
	var used []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				used = append(used, ip.Unmap())
			}
		}
	}
	return used
}

func holdsAny(p netip.Prefix, addrs []netip.Addr) bool {
	for _, a := range addrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
