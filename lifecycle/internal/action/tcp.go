package action

import (
	"context"
	"fmt"
	"net"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// TCP runs a tcpSocket action against the container c at host
// (tcp.Host wins when set): Success once a connection opens (it is closed
// at once), Failure with the dial error otherwise ("i/o timeout" for one
// cut by WithTimeout's timeout), Unknown when the port does not resolve or
// there is no host.
func TCP(ctx context.Context, tcp *v1.TCPSocketAction, c *v1.Container, host string) Result {
	if tcp == nil {
		return unknown(fmt.Errorf("no tcpSocket action"))
	}
	port, err := ResolvePort(tcp.Port, c)
	if err != nil {
		return unknown(err)
	}
	if tcp.Host != "" {
		host = tcp.Host
	}
	if host == "" {
		return unknown(fmt.Errorf("no host to connect to: the action sets none and the pod has no IP"))
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := dialer().DialContext(ctx, "tcp", addr)
	if err != nil {
		if TimedOut(ctx) {
			return failure(fmt.Sprintf("dial tcp %s: i/o timeout", addr))
		}
		return failure(err.Error())
	}
	_ = conn.Close()
	return Result{Outcome: Success}
}
