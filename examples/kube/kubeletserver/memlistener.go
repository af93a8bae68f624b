package kubeletserver

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
)

// memListener is a net.Listener whose connections are in-memory pipes
// made by its DialContext: the local streaming server listens on it and
// only the Server's proxy dials it, so its sessions are reachable from
// nowhere else. Each server-side connection carries a context (for
// http.Server.ConnContext) that ends when the connection is closed or
// its peer hangs up, so a runtime's session notices a client that left.
// Safe for concurrent use.
type memListener struct {
	accept chan *memConn
	done   chan struct{}
	once   sync.Once

	mu sync.Mutex
	// open holds the server-side connections not yet closed.
	open map[*memConn]struct{}
}

func newMemListener() *memListener {
	return &memListener{accept: make(chan *memConn), done: make(chan struct{}), open: map[*memConn]struct{}{}}
}

// DialContext connects to the listener; network and address are ignored.
func (l *memListener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	c := &memConn{Conn: server, l: l}
	l.mu.Lock()
	l.open[c] = struct{}{}
	l.mu.Unlock()
	var err error
	select {
	case l.accept <- c:
		return client, nil
	case <-l.done:
		err = net.ErrClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	client.Close()
	c.Close()
	return nil, &net.OpError{Op: "dial", Net: "memory", Err: err}
}

// Accept returns the next connection dialled.
func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections already made stay open.
func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// closeAll closes the listener and every connection it made.
func (l *memListener) closeAll() {
	l.Close()
	l.mu.Lock()
	open := make([]*memConn, 0, len(l.open))
	for c := range l.open {
		open = append(open, c)
	}
	l.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// Addr is a placeholder address.
func (l *memListener) Addr() net.Addr { return memAddr{} }

// connContext is the http.Server's ConnContext: ctx, ended when c closes.
func (l *memListener) connContext(ctx context.Context, c net.Conn) context.Context {
	mc, ok := c.(*memConn)
	if !ok {
		return ctx
	}
	ctx, cancel := context.WithCancel(ctx)
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.closed {
		cancel()
	} else {
		mc.cancel = cancel
	}
	return ctx
}

// memConn is the server side of a pipe. A read that fails for another
// reason than a deadline (the peer hung up) or Close ends its context;
// the HTTP server sets past read deadlines to wake its own reader.
type memConn struct {
	net.Conn
	l *memListener

	mu     sync.Mutex
	closed bool
	cancel context.CancelFunc
}

func (c *memConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.end()
	}
	return n, err
}

func (c *memConn) Close() error {
	c.end()
	return c.Conn.Close()
}

// end marks c closed, ends its context and forgets it.
func (c *memConn) end() {
	c.mu.Lock()
	c.closed = true
	cancel := c.cancel
	c.cancel = nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.l.mu.Lock()
	delete(c.l.open, c)
	c.l.mu.Unlock()
}

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return localHost }
