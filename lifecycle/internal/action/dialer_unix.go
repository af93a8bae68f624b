//go:build unix

package action

import (
	"net"
	"syscall"
)

// dialer returns the dialer of every action's connection. Like the
// kubelet's, it sets SO_LINGER to one second, so that a probe's closed
// socket spends one second in TIME-WAIT instead of the system's minute
// (a node probing many pods otherwise runs out of ports), while still
// ending with a FIN rather than a reset.
func dialer() *net.Dialer {
	return &net.Dialer{
		Control: func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) {
				_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
			})
		},
	}
}
