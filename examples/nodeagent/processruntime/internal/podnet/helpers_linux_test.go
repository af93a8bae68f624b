package podnet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"golang.org/x/sys/unix"

	"github.com/podkit/podkit/examples/internal/podrangetest"
)

// Helpers of the tests that build real networks. Each test network has a
// random bridge name and range (other tests may run on the host at the
// same time), and its cleanup tears everything down and checks that
// nothing is left: no bridge, no veth, no kept namespace, no thread of
// the test binary in a foreign namespace.

// dialTimeout bounds a connection attempt that should succeed at once; a
// test that expects a refusal gets it at once too (an RST, not a drop).
const dialTimeout = 10 * time.Second

// requireNetAdmin skips the test unless it may create bridges, veths,
// namespaces and mounts, and observe them with ip(8) and nsenter(1).
func requireNetAdmin(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("podnet: skipped: needs root to create bridges, veth pairs and network namespaces")
	}
	caps, err := effectiveCaps()
	require.NoError(t, err)
	for _, c := range []struct {
		bit  uint
		name string
	}{{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"}, {unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN"}} {
		if caps&(1<<c.bit) == 0 {
			t.Skipf("podnet: skipped: needs %s (root without it, as in an unprivileged container)", c.name)
		}
	}
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("podnet: skipped: needs %s to observe the network", tool)
		}
	}
}

func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no CapEff in /proc/self/status")
}

// testOptions are options with a state directory of the test's, a random
// bridge name and a random /24 in 10.200.0.0-10.249.255.0.
func testOptions(t *testing.T) Options {
	return Options{
		StateDir:   filepath.Join(t.TempDir(), "state"),
		PodCIDR:    podrangetest.Range(t),
		BridgeName: podrangetest.Bridge(t, "pkt"),
	}
}

// newTestNetwork opens a Network over opts; its cleanup tears down
// whatever a Network over the same state directory then finds, and checks
// that the host is clean. A test that opens another Network over the
// directory closes it (reopen does) before this cleanup runs.
func newTestNetwork(t *testing.T, opts Options) *Network {
	t.Helper()
	n, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, n.Close())
		m, err := New(opts)
		require.NoError(t, err)
		require.NoError(t, m.Teardown(context.Background()))
		require.NoError(t, m.Close())
		requireHostClean(t, opts)
	})
	return n
}

// reopen closes n and opens a Network over its state directory again, as
// a restarted agent does; the new one is closed at cleanup.
func reopen(t *testing.T, n *Network) *Network {
	t.Helper()
	require.NoError(t, n.Close())
	m, err := New(n.opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

// requireHostClean checks that nothing of the network is left on the host.
func requireHostClean(t *testing.T, opts Options) {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), opts.BridgeName, "the bridge or a port of it is left")
	entries, err := os.ReadDir(filepath.Join(opts.StateDir, "netns"))
	require.NoError(t, err)
	require.Empty(t, entries, "kept network namespaces are left")
	entries, err = os.ReadDir(filepath.Join(opts.StateDir, "ips"))
	require.NoError(t, err)
	require.Empty(t, entries, "IP allocations are left")
	requireThreadsInHostNetns(t)
}

// requireThreadsInHostNetns checks that every thread of the test binary is
// in the process's network namespace.
func requireThreadsInHostNetns(t *testing.T) {
	t.Helper()
	host, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, task := range tasks {
		ns, err := os.Readlink(filepath.Join("/proc/self/task", task.Name(), "ns/net"))
		if err != nil {
			continue // the thread ended meanwhile
		}
		require.Equal(t, host, ns, "thread %s is in another network namespace", task.Name())
	}
}

// procNetns starts a process in a network namespace of its own (and, with
// userNS, a user namespace of its own owning it, as a sandboxed pod's
// init would be) and returns the path of its namespace file; the process
// is killed at cleanup, or by kill.
func procNetns(t *testing.T, userNS bool) (path string, kill func()) {
	t.Helper()
	cmd := exec.Command("sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if userNS {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000 + rand.IntN(1000), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000 + rand.IntN(1000), Size: 1}}
	}
	require.NoError(t, cmd.Start())
	var killed bool
	kill = func() {
		if !killed {
			killed = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(kill)
	return fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), kill
}

// withNetns runs fn in the network namespace of the file path.
func withNetns(t *testing.T, path string, fn func() error) {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, inNetns(fd, fn))
}

// serveIn listens on addr in the network namespace path ("" for the
// host's) and answers every connection with reply; it returns the
// listener's address. It stops at cleanup.
func serveIn(t *testing.T, path, addr, reply string) *net.TCPAddr {
	t.Helper()
	var ln net.Listener
	listen := func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	}
	if path == "" {
		require.NoError(t, listen())
	} else {
		withNetns(t, path, listen)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(reply))
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return ln.Addr().(*net.TCPAddr)
}

// fetchFrom connects to addr from the network namespace path ("" for the
// host's) and returns what the server sent.
func fetchFrom(t *testing.T, path string, addr netip.AddrPort) (string, error) {
	t.Helper()
	var c net.Conn
	dial := func() (err error) {
		c, err = net.DialTimeout("tcp4", addr.String(), dialTimeout)
		return err
	}
	var err error
	if path == "" {
		err = dial()
	} else {
		fd, oerr := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		require.NoError(t, oerr)
		err = inNetns(fd, dial)
		unix.Close(fd)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(dialTimeout)))
	b, err := io.ReadAll(c)
	return string(b), err
}

// requireReaches checks that a connection from the network namespace from
// ("" for the host's) to addr gets want.
func requireReaches(t *testing.T, from string, addr netip.AddrPort, want string) {
	t.Helper()
	got, err := fetchFrom(t, from, addr)
	require.NoError(t, err, "from %q to %s", from, addr)
	require.Equal(t, want, got, "from %q to %s", from, addr)
}

// ipIn runs ip(8) with args in the network namespace path ("" for the
// host's) and returns its output.
func ipIn(t *testing.T, path string, args ...string) string {
	t.Helper()
	var cmd *exec.Cmd
	if path == "" {
		cmd = exec.Command("ip", args...)
	} else {
		cmd = exec.Command("nsenter", append([]string{"--net=" + path, "ip"}, args...)...)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s", cmd, out)
	return string(out)
}

// requirePodConfigured checks, from ip(8), what Attach set up inside the
// namespace path and on the host for pod ip.
func requirePodConfigured(t *testing.T, n *Network, path string, ip netip.Addr) {
	t.Helper()
	bits := n.PodCIDR().Bits()
	require.Contains(t, ipIn(t, path, "-4", "-o", "addr", "show", "dev", "eth0"), fmt.Sprintf("inet %s/%d", ip, bits))
	require.Contains(t, ipIn(t, path, "-4", "route", "show", "default"), fmt.Sprintf("default via %s dev eth0", n.Gateway()))
	require.Contains(t, ipIn(t, path, "-o", "link", "show", "dev", "lo"), "UP")
	require.Contains(t, ipIn(t, path, "-o", "link", "show", "dev", "eth0"), "UP")
}

// ports lists the names of the bridge's ports.
func ports(t *testing.T, n *Network) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(ipIn(t, "", "-o", "link", "show", "master", n.BridgeName())), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			names = append(names, name)
		}
	}
	return names
}

// ifIndex is the index of the host's link name.
func ifIndex(t *testing.T, name string) int {
	t.Helper()
	ifc, err := net.InterfaceByName(name)
	require.NoError(t, err)
	return ifc.Index
}
