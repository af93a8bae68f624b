package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// long is a timeout no test waits for; patience is how long a test waits
// for the server to close a connection, far more than the short timeouts
// it sets need.
const (
	long     = time.Hour
	patience = 20 * time.Second
)

// serveWithTimeouts serves an idle agent's endpoint with timeouts on a
// loopback listener, and returns its address.
func serveWithTimeouts(t *testing.T, timeouts httpTimeouts) string {
	t.Helper()
	a := newIdleAgent(t, 1, 10)
	a.server.timeouts = timeouts
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := a.server.newHTTPServer()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// dial connects to addr and sends what.
func dial(t *testing.T, addr, what string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, what)
	require.NoError(t, err)
	return c, bufio.NewReader(c)
}

// requireClosed waits for the server to close c: a read that ends (EOF,
// or a reset) before the client's own deadline. It returns what was read
// until then.
func requireClosed(t *testing.T, c net.Conn, r *bufio.Reader, why string) string {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(patience)))
	rest, err := io.ReadAll(r)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: the connection is still open after %v", why, patience)
	}
	return string(rest)
}

// readResponse reads one response from r and returns its status.
func readResponse(t *testing.T, c net.Conn, r *bufio.Reader) int {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(patience)))
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// A client that sends part of its headers and then nothing is
// disconnected once the header timeout passes.
func TestTheEndpointClosesAConnectionWhoseHeadersDoNotArrive(t *testing.T) {
	t.Parallel()
	addr := serveWithTimeouts(t, httpTimeouts{readHeader: 200 * time.Millisecond, read: long, write: long, idle: long})
	c, r := dial(t, addr, "GET /pods HTTP/1.1\r\nHost: agent\r\n")
	assert.Empty(t, requireClosed(t, c, r, "partial headers"), "nothing is served")
}

// A client that sends its headers but not the body it announced is
// disconnected once the read timeout passes, even with the headers in
// time and a long idle timeout. (The server reads what is left of a body
// before it replies, so the reply, if any, comes only then.)
func TestTheEndpointClosesAConnectionWhoseRequestDoesNotArrive(t *testing.T) {
	t.Parallel()
	addr := serveWithTimeouts(t, httpTimeouts{readHeader: long, read: 200 * time.Millisecond, write: long, idle: long})
	c, r := dial(t, addr, "GET /healthz HTTP/1.1\r\nHost: agent\r\nContent-Length: 100\r\n\r\npart of the body")
	requireClosed(t, c, r, "a body that never ends")
}

// A kept-alive connection left idle after a reply is closed once the idle
// timeout passes.
func TestTheEndpointClosesAnIdleConnection(t *testing.T) {
	t.Parallel()
	addr := serveWithTimeouts(t, httpTimeouts{readHeader: long, read: long, write: long, idle: 200 * time.Millisecond})
	c, r := dial(t, addr, "GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n")
	assert.Equal(t, http.StatusOK, readResponse(t, c, r))
	// The connection is kept alive: it serves a second request.
	_, err := fmt.Fprint(c, "GET /pods?limit=1 HTTP/1.1\r\nHost: agent\r\n\r\n")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, readResponse(t, c, r))
	assert.Empty(t, requireClosed(t, c, r, "an idle kept-alive connection"), "nothing more is served")
}

func TestTheAgentsHTTPTimeouts(t *testing.T) {
	t.Parallel()
	a := newIdleAgent(t, 0, 0)
	srv := a.server.newHTTPServer()
	assert.Equal(t, 5*time.Second, srv.ReadHeaderTimeout)
	assert.Equal(t, 10*time.Second, srv.ReadTimeout)
	assert.Equal(t, 30*time.Second, srv.WriteTimeout)
	assert.Equal(t, 60*time.Second, srv.IdleTimeout)
	assert.Equal(t, httpMaxHeaderBytes, srv.MaxHeaderBytes)
}
