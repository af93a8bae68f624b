package processruntime

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/podnet"
)

// portForwardDialTimeout bounds the connection to the pod's port.
const portForwardDialTimeout = 10 * time.Second

// PortForward connects stream to TCP port of pod uid on the network the
// pod uses (kubectl port-forward, one call per forwarded connection), as
// a kubelet does: to 127.0.0.1:port inside the pod's network namespace
// (dialled from an OS thread that enters it and is put back after, never
// left there), or on the host's loopback for a pod in the host's network
// (hostNetwork, or a runtime without sandboxes). It copies both ways
// until either side has closed and the other has ended too, or ctx ends,
// and closes stream. The error says the pod is unknown (ErrNotFound), its
// sandbox does not run (ErrNotRunning), the port is out of range, or
// nothing listens there (the dial's error, connection refused). Called
// from any goroutine, concurrently for any connections.
func (r *Runtime) PortForward(ctx context.Context, uid types.UID, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	if port <= 0 || port > 65535 {
		return fmt.Errorf("processruntime: port-forward: port %d is out of range", port)
	}
	if r.closed() {
		return ErrClosed
	}
	netns, err := r.podNetwork(uid)
	if err != nil {
		return fmt.Errorf("processruntime: port-forward: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, portForwardDialTimeout)
	defer cancel()
	var conn net.Conn
	if netns == "" {
		var d net.Dialer
		conn, err = d.DialContext(dctx, "tcp4", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
	} else {
		conn, err = podnet.DialLoopback(dctx, netns, uint16(port))
	}
	if err != nil {
		return fmt.Errorf("processruntime: port-forward to port %d of pod %s: %w", port, uid, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() {
		conn.Close()
		stream.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(conn, stream)
		// The client is done sending: the pod's server reads end of file
		// and may still answer.
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	})
	_, _ = io.Copy(stream, conn)
	// The pod's side is done: closing the stream ends the other copy.
	stream.Close()
	wg.Wait()
	return nil
}

// podNetwork returns the path of the network namespace the pod's port
// is reached in, or "" for the host's network.
func (r *Runtime) podNetwork(uid types.UID) (string, error) {
	r.mu.Lock()
	p := r.pods[uid]
	switch {
	case p == nil || p.cleanedUp:
		r.mu.Unlock()
		return "", fmt.Errorf("%w: pod %s", ErrNotFound, uid)
	case r.sandboxes == nil:
		r.mu.Unlock()
		return "", nil
	case p.sb == nil || p.sb.ended():
		r.mu.Unlock()
		return "", fmt.Errorf("%w: the sandbox of pod %s/%s", ErrNotRunning, p.namespace, p.name)
	case !p.sb.rec.NetNS:
		r.mu.Unlock()
		return "", nil
	}
	r.mu.Unlock()
	netns := r.NetNS(uid)
	if netns == "" {
		return "", fmt.Errorf("%w: the sandbox of pod %s", ErrNotRunning, uid)
	}
	return netns, nil
}
