package kubeletserver

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// backends dials the streaming servers the Server proxies sessions to
// (a CRI runtime's, or the local one) and keeps the connections open, so
// that shutting down can close them: the proxied sessions then end on
// both sides. Safe for concurrent use.
type backends struct {
	dial func(ctx context.Context, network, address string) (net.Conn, error)

	mu     sync.Mutex
	closed bool
	// open holds the connections dialled and not yet closed.
	open map[*backendConn]struct{}
}

func newBackends(dial func(ctx context.Context, network, address string) (net.Conn, error)) *backends {
	return &backends{dial: dial, open: map[*backendConn]struct{}{}}
}

// transport is an HTTP transport over the tracked dialer, for the
// upgrade proxies. It uses no proxy from the environment: the streaming
// servers are the node's own.
func (b *backends) transport() *http.Transport {
	return &http.Transport{DialContext: b.DialContext, DisableKeepAlives: true, Proxy: nil}
}

// DialContext dials and tracks the connection.
func (b *backends) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := b.dial(ctx, network, address)
	if err != nil {
		return nil, err
	}
	c := &backendConn{Conn: conn, b: b}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		conn.Close()
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.ErrClosed}
	}
	b.open[c] = struct{}{}
	return c, nil
}

// closeAll closes every connection and refuses new ones.
func (b *backends) closeAll() {
	b.mu.Lock()
	b.closed = true
	open := make([]*backendConn, 0, len(b.open))
	for c := range b.open {
		open = append(open, c)
	}
	b.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

type backendConn struct {
	net.Conn
	b    *backends
	once sync.Once
}

func (c *backendConn) Close() error {
	c.once.Do(func() {
		c.b.mu.Lock()
		delete(c.b.open, c)
		c.b.mu.Unlock()
	})
	return c.Conn.Close()
}
