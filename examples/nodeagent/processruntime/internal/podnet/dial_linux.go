//go:build linux

package podnet

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// DialLoopback connects to TCP port on 127.0.0.1 of the network namespace
// at netnsPath (a pod's, NetnsPath, or /proc/<pid>/ns/net), as a kubelet's
// port-forward reaches a pod's port. The socket is made on an OS thread
// of its own that enters the namespace and is put back in the process's
// after (a thread that cannot be put back is ended, never reused; see
// inNetns), so the connection belongs to the pod's network while the
// agent's threads stay in the host's. The connection is the caller's.
// ctx bounds the dial. Safe for concurrent use. The error says the
// namespace cannot be entered, or the dial's (connection refused: nothing
// listens on the port).
func DialLoopback(ctx context.Context, netnsPath string, port uint16) (net.Conn, error) {
	if port == 0 {
		return nil, fmt.Errorf("podnet: port 0 cannot be dialled")
	}
	ns, err := unix.Open(netnsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("podnet: network namespace %s: %w", netnsPath, err)
	}
	defer unix.Close(ns)
	var conn net.Conn
	err = inNetns(ns, func() error {
		// The socket is created on this thread, in the namespace: a
		// literal address needs no resolver, and the dial runs in this
		// goroutine, which stays on this thread while it waits.
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
		return err
	})
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, err
	}
	return conn, nil
}
