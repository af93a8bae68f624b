package podnet

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// Two pods, one in the namespace of a process (as a sandbox's init gives
// it) and one in a namespace Attach creates, each listening on the same
// port: each reaches the other by its IP, the host reaches both, each
// reaches itself on its loopback, and the bridge has their two veths.
func TestAttachTwoPodsReachEachOtherAndTheHost(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	n := newTestNetwork(t, testOptions(t))
	procNS, _ := procNetns(t, false)

	ipsA, err := n.Attach(ctx, "pod-a", procNS)
	require.NoError(t, err)
	ipsB, err := n.Attach(ctx, "pod-b", "")
	require.NoError(t, err)
	require.Len(t, ipsA, 1)
	require.Len(t, ipsB, 1)
	a, b := ipsA[0], ipsB[0]
	assert.NotEqual(t, a, b)
	for _, ip := range []netip.Addr{a, b} {
		assert.True(t, n.PodCIDR().Contains(ip), "%s outside %s", ip, n.PodCIDR())
		assert.NotEqual(t, n.Gateway(), ip)
	}
	nsA, nsB := n.NetnsPath("pod-a"), n.NetnsPath("pod-b")
	requirePodConfigured(t, n, nsA, a)
	requirePodConfigured(t, n, nsB, b)
	assert.ElementsMatch(t, []string{vethName(n.BridgeName(), "pod-a"), vethName(n.BridgeName(), "pod-b")}, ports(t, n))
	// The kept namespace is the process's.
	want, err := netnsID(procNS)
	require.NoError(t, err)
	have, err := netnsID(nsA)
	require.NoError(t, err)
	assert.Equal(t, want, have)

	const port = 8080
	serveIn(t, nsA, "0.0.0.0:8080", "pod-a")
	serveIn(t, nsB, "0.0.0.0:8080", "pod-b")
	for _, c := range []struct {
		name, from string
		to         netip.Addr
		want       string
	}{
		{"b to a", nsB, a, "pod-a"},
		{"a to b", nsA, b, "pod-b"},
		{"host to a", "", a, "pod-a"},
		{"host to b", "", b, "pod-b"},
		{"a to its loopback", nsA, netip.MustParseAddr("127.0.0.1"), "pod-a"},
		{"b to its loopback", nsB, netip.MustParseAddr("127.0.0.1"), "pod-b"},
	} {
		t.Log(c.name)
		requireReaches(t, c.from, netip.AddrPortFrom(c.to, port), c.want)
	}

	// A pod reaches the node at the gateway address.
	gw := serveIn(t, "", netip.AddrPortFrom(n.Gateway(), 0).String(), "node")
	requireReaches(t, nsA, netip.AddrPortFrom(n.Gateway(), uint16(gw.Port)), "node")
}

// What the host serves on its loopback only (etcd on 127.0.0.1, an
// agent's local endpoint) is out of a pod's reach: its loopback is its
// own, and the host does not route 127/8 from a bridge.
func TestPodCannotReachHostLoopback(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	n := newTestNetwork(t, testOptions(t))
	_, err := n.Attach(ctx, "pod-a", "")
	require.NoError(t, err)
	ns := n.NetnsPath("pod-a")

	local := serveIn(t, "", "127.0.0.1:0", "secret")
	port := uint16(local.Port)
	requireReaches(t, "", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), "secret")

	for _, to := range []netip.Addr{netip.MustParseAddr("127.0.0.1"), n.Gateway()} {
		_, err := fetchFrom(t, ns, netip.AddrPortFrom(to, port))
		require.ErrorIs(t, err, syscall.ECONNREFUSED, "pod reached the host's loopback service at %s", to)
	}
}

// The namespace of a process (as a sandbox's init gives it, with a user
// namespace of its own owning it or not) is kept under the state
// directory: it outlives the process, with the pod's address and veth
// still in it.
func TestAttachNetnsOfAProcess(t *testing.T) {
	requireNetAdmin(t)
	for _, c := range []struct {
		name         string
		userNS, kill bool
	}{
		{"process ends", false, true},
		{"in a user namespace", true, false},
		{"in a user namespace, process ends", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			n := newTestNetwork(t, testOptions(t))
			procNS, kill := procNetns(t, c.userNS)
			ips, err := n.Attach(ctx, "pod-a", procNS)
			require.NoError(t, err)
			if c.kill {
				kill()
			}
			ns := n.NetnsPath("pod-a")
			requirePodConfigured(t, n, ns, ips[0])
			serveIn(t, ns, "0.0.0.0:80", c.name)
			requireReaches(t, "", netip.AddrPortFrom(ips[0], 80), c.name)
		})
	}
}

// Attach again changes nothing that is in place (the same veth, the same
// address), whether given "", the kept path or the same namespace; given
// another namespace, the pod moves there and keeps its address.
func TestAttachIsIdempotent(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	n := newTestNetwork(t, testOptions(t))
	procNS, _ := procNetns(t, false)
	ips, err := n.Attach(ctx, "pod-a", procNS)
	require.NoError(t, err)
	veth := vethName(n.BridgeName(), "pod-a")
	index := ifIndex(t, veth)
	for _, again := range []string{"", n.NetnsPath("pod-a"), procNS} {
		got, err := n.Attach(ctx, "pod-a", again)
		require.NoError(t, err, "again with %q", again)
		assert.Equal(t, ips, got, "again with %q", again)
		assert.Equal(t, index, ifIndex(t, veth), "again with %q: the veth was made again", again)
	}

	// Repairs what is missing: the pod's eth0 down, its address gone.
	ipIn(t, n.NetnsPath("pod-a"), "addr", "flush", "dev", "eth0")
	ipIn(t, n.NetnsPath("pod-a"), "link", "set", "eth0", "down")
	got, err := n.Attach(ctx, "pod-a", "")
	require.NoError(t, err)
	assert.Equal(t, ips, got)
	requirePodConfigured(t, n, n.NetnsPath("pod-a"), ips[0])

	// Repairs a bridge deleted under it: the pod's veth, released from
	// it, becomes its port again.
	ipIn(t, "", "link", "del", n.BridgeName())
	got, err = n.Attach(ctx, "pod-a", "")
	require.NoError(t, err)
	assert.Equal(t, ips, got)
	assert.Equal(t, []string{veth}, ports(t, n))
	serveIn(t, n.NetnsPath("pod-a"), "0.0.0.0:80", "repaired")
	requireReaches(t, "", netip.AddrPortFrom(ips[0], 80), "repaired")

	// Moves to a new namespace.
	otherNS, _ := procNetns(t, false)
	got, err = n.Attach(ctx, "pod-a", otherNS)
	require.NoError(t, err)
	assert.Equal(t, ips, got)
	requirePodConfigured(t, n, otherNS, ips[0])
	assert.NotContains(t, ipIn(t, procNS, "-o", "link"), "eth0", "the old namespace keeps a veth")
	want, _ := netnsID(otherNS)
	have, _ := netnsID(n.NetnsPath("pod-a"))
	assert.Equal(t, want, have)
	assert.Equal(t, []string{veth}, ports(t, n))
}

// Detach removes the veth (on both sides), the kept namespace and the
// address, and is idempotent; the address is free again.
func TestDetachIsIdempotent(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	n := newTestNetwork(t, testOptions(t))
	procNS, _ := procNetns(t, false)
	ips, err := n.Attach(ctx, "pod-a", procNS)
	require.NoError(t, err)

	require.NoError(t, n.Detach(ctx, "pod-a"))
	assert.Empty(t, ports(t, n))
	assert.NotContains(t, ipIn(t, procNS, "-o", "link"), "eth0")
	assert.NoFileExists(t, n.NetnsPath("pod-a"))
	assert.NoFileExists(t, filepath.Join(n.ipamDir, ips[0].String()))
	_, ok := n.ipam.lookup("pod-a")
	assert.False(t, ok)

	require.NoError(t, n.Detach(ctx, "pod-a"), "again")
	require.NoError(t, n.Detach(ctx, "never-attached"))
	require.Error(t, n.Detach(ctx, "../escape"))
}

// A restarted agent keeps each pod's address, and never hands it to
// another pod; a second Network over one state directory is refused.
func TestReopenKeepsAddresses(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	n := newTestNetwork(t, testOptions(t))
	ipsA, err := n.Attach(ctx, "pod-a", "")
	require.NoError(t, err)
	ipsB, err := n.Attach(ctx, "pod-b", "")
	require.NoError(t, err)

	_, err = New(n.opts)
	require.ErrorContains(t, err, "in use by another Network")

	m := reopen(t, n)
	_, err = n.Attach(ctx, "pod-c", "")
	require.ErrorIs(t, err, ErrClosed)
	gotA, err := m.Attach(ctx, "pod-a", "")
	require.NoError(t, err)
	assert.Equal(t, ipsA, gotA)
	gotB, err := m.Attach(ctx, "pod-b", "")
	require.NoError(t, err)
	assert.Equal(t, ipsB, gotB)
	ipsC, err := m.Attach(ctx, "pod-c", "")
	require.NoError(t, err)
	assert.NotContains(t, []netip.Addr{ipsA[0], ipsB[0]}, ipsC[0])
	requirePodConfigured(t, m, m.NetnsPath("pod-a"), ipsA[0])
}

// A /30 holds one pod: the second is refused with ErrRangeExhausted, and
// gets the address once the first is detached.
func TestAttachRangeExhausted(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	opts := testOptions(t)
	opts.PodCIDR = netip.PrefixFrom(opts.PodCIDR.Addr(), 30)
	n := newTestNetwork(t, opts)
	ips, err := n.Attach(ctx, "pod-a", "")
	require.NoError(t, err)
	_, err = n.Attach(ctx, "pod-b", "")
	require.ErrorIs(t, err, ErrRangeExhausted)
	require.ErrorContains(t, err, opts.PodCIDR.String())
	require.NoFileExists(t, n.NetnsPath("pod-b"), "a refused pod got a namespace")

	require.NoError(t, n.Detach(ctx, "pod-a"))
	got, err := n.Attach(ctx, "pod-b", "")
	require.NoError(t, err)
	assert.Equal(t, ips, got)
}

// A range another interface has, or a bridge name another kind of link
// has, is refused; so is a bridge holding another range.
func TestAttachRefusesConflicts(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	first := newTestNetwork(t, testOptions(t))
	_, err := first.Attach(ctx, "pod-a", "")
	require.NoError(t, err)

	same := testOptions(t)
	same.PodCIDR = first.PodCIDR()
	_, err = newTestNetwork(t, same).Attach(ctx, "pod-b", "")
	require.ErrorContains(t, err, "overlaps address")

	// Another node's bridge: refused, and neither Sweep nor Teardown
	// touches it or its ports.
	sameBridge := testOptions(t)
	sameBridge.BridgeName = first.BridgeName()
	sameBridge.PodCIDR = netip.MustParsePrefix("10.199.0.0/24")
	sb, err := New(sameBridge)
	require.NoError(t, err)
	defer sb.Close()
	_, err = sb.Attach(ctx, "pod-b", "")
	require.ErrorContains(t, err, "another node uses the bridge")
	require.ErrorContains(t, sb.Sweep(ctx, func(types.UID) bool { return false }), "left alone")
	require.ErrorContains(t, sb.Teardown(ctx), "left alone")
	assert.Equal(t, []string{vethName(first.BridgeName(), "pod-a")}, ports(t, first))

	notBridge := testOptions(t)
	out, err := exec.Command("ip", "link", "add", notBridge.BridgeName, "type", "veth", "peer", "name", notBridge.BridgeName+"p").CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", notBridge.BridgeName).Run() })
	nb, err := New(notBridge)
	require.NoError(t, err)
	defer nb.Close()
	_, err = nb.Attach(ctx, "pod-b", "")
	require.ErrorContains(t, err, "is not a bridge")
	require.ErrorContains(t, nb.Teardown(ctx), "is not a bridge", "Teardown deleted a link that is not its bridge")
	require.NoError(t, exec.Command("ip", "link", "show", notBridge.BridgeName).Run())
}

// Pods of two bridges on one host reach each other when the host forwards
// (Options.IPForward turns it on); the test puts the host's setting back.
func TestTwoBridgesWithIPForward(t *testing.T) {
	requireNetAdmin(t)
	before, err := os.ReadFile(ipForwardPath)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, os.WriteFile(ipForwardPath, before, 0o644)) })
	ctx := context.Background()
	o1, o2 := testOptions(t), testOptions(t)
	for o2.PodCIDR == o1.PodCIDR {
		o2 = testOptions(t)
	}
	o1.IPForward, o2.IPForward = true, true
	n1, n2 := newTestNetwork(t, o1), newTestNetwork(t, o2)
	ips1, err := n1.Attach(ctx, "pod-1", "")
	require.NoError(t, err)
	ips2, err := n2.Attach(ctx, "pod-2", "")
	require.NoError(t, err)
	now, err := os.ReadFile(ipForwardPath)
	require.NoError(t, err)
	require.Equal(t, "1", strings.TrimSpace(string(now)))

	serveIn(t, n2.NetnsPath("pod-2"), "0.0.0.0:80", "node-2")
	requireReaches(t, n1.NetnsPath("pod-1"), netip.AddrPortFrom(ips2[0], 80), "node-2")
	serveIn(t, n1.NetnsPath("pod-1"), "0.0.0.0:80", "node-1")
	requireReaches(t, n2.NetnsPath("pod-2"), netip.AddrPortFrom(ips1[0], 80), "node-1")
}

// Bad arguments get clear errors and touch nothing.
func TestAttachBadArguments(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	n := newTestNetwork(t, testOptions(t))
	taken, err := n.Attach(ctx, "pod-taken", "")
	require.NoError(t, err)
	for _, c := range []struct {
		uid   types.UID
		netns string
		want  string
	}{
		{"", "", "empty pod UID"},
		{"a/b", "", "has '/'"},
		{"pod-a", "/nonexistent", "no such file"},
		{"pod-a", "/proc/self/ns/mnt", "not of a network namespace"},
		{"pod-a", "/etc/hostname", "not a namespace file"},
		{"pod-a", "/proc/self/ns/net", "the host's network namespace"},
		{"pod-b", n.NetnsPath("pod-taken"), "is pod pod-taken's"},
	} {
		_, err := n.Attach(ctx, c.uid, c.netns)
		require.ErrorContains(t, err, c.want, "uid %q netns %q", c.uid, c.netns)
		require.True(t, strings.HasPrefix(err.Error(), "podnet: "), err.Error())
	}
	entries, err := os.ReadDir(n.ipamDir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "a refused Attach allocated an address")
	assert.Equal(t, taken[0].String(), entries[0].Name())
	requirePodConfigured(t, n, n.NetnsPath("pod-taken"), taken[0])

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = n.Attach(cancelled, "pod-a", "")
	require.ErrorIs(t, err, context.Canceled)
}

// pidfdThread is PIDFD_THREAD (Linux 6.9), which x/sys/unix lacks: a
// pidfd of one thread rather than of a process.
const pidfdThread = unix.O_EXCL

// A thread that cannot be put back into the host's namespace is ended, so
// no goroutine ever runs on it in the pod's namespace.
func TestThreadThatCannotReturnEnds(t *testing.T) {
	requireNetAdmin(t)
	path, _ := procNetns(t, false)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)

	var pidfd int
	var onMain bool
	err = onLockedThread(func() error {
		tid := unix.Gettid()
		onMain = tid == unix.Getpid()
		var err error
		if pidfd, err = unix.PidfdOpen(tid, pidfdThread); err != nil {
			return err
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return err
		}
		// Break the way back: capabilities are per thread, and without
		// CAP_SYS_ADMIN the thread's setns to the host fails (EPERM).
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return err
		}
		data[unix.CAP_SYS_ADMIN/32].Effective &^= 1 << (unix.CAP_SYS_ADMIN % 32)
		return unix.Capset(&hdr, &data[0])
	})
	if err != nil && !strings.Contains(err.Error(), "could not return") {
		if pidfd > 0 {
			unix.Close(pidfd)
		}
		t.Skipf("podnet: skipped: cannot set up a thread that fails to return: %v", err)
	}
	require.False(t, onMain, "moved the main thread, which cannot end")
	require.ErrorIs(t, err, errThreadLost)
	defer unix.Close(pidfd)
	// The thread's pidfd becomes readable when the thread has exited.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	ready, err := unix.Poll(fds, int(dialTimeout.Milliseconds()))
	require.NoError(t, err)
	require.Equal(t, 1, ready, "the thread left in the pod's namespace still runs")
	requireThreadsInHostNetns(t)
}

// Attach and Detach from many goroutines at once: every pod gets an
// address of its own and a veth; all are gone after.
func TestConcurrentAttachDetach(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	n := newTestNetwork(t, testOptions(t))
	const pods = 16
	ips := make([]netip.Addr, pods)
	errs := make(chan error, pods)
	for i := range pods {
		go func() {
			got, err := n.Attach(ctx, types.UID(fmt.Sprintf("pod-%d", i)), "")
			if err == nil {
				ips[i] = got[0]
			}
			errs <- err
		}()
	}
	for range pods {
		require.NoError(t, <-errs)
	}
	seen := map[netip.Addr]bool{}
	for _, ip := range ips {
		require.False(t, seen[ip], "%s handed out twice", ip)
		seen[ip] = true
	}
	require.Len(t, ports(t, n), pods)
	for i := range pods {
		go func() { errs <- n.Detach(ctx, types.UID(fmt.Sprintf("pod-%d", i))) }()
	}
	for range pods {
		require.NoError(t, <-errs)
	}
	require.Empty(t, ports(t, n))
}

// A caller waiting for its turn gives up when its ctx ends.
func TestAttachWaitHonoursContext(t *testing.T) {
	requireNetAdmin(t)
	n := newTestNetwork(t, testOptions(t))
	n.sem <- struct{}{} // another operation's turn
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := n.Attach(ctx, "pod-a", "")
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	n.releaseSem()
	_, ok := n.ipam.lookup("pod-a")
	require.False(t, ok)
}
