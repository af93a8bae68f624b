package kubeletserver_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

// closedWithin is a bound on waiting for the server to close a
// connection, only so that a broken server fails the test instead of
// hanging it; the tests wait for the close itself.
const closedWithin = time.Minute

// waitClosed reads c until the server closes it, and fails if it sends
// anything or does not close.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(closedWithin)))
	n, err := c.Read(make([]byte, 1))
	assert.Zero(t, n)
	var netErr net.Error
	require.False(t, errors.As(err, &netErr) && netErr.Timeout(), "the server kept the connection open")
	assert.Error(t, err)
}

// TestUnauthenticatedConnectionsClosed: a connection that got a 401 is
// closed at once, one that sends no request within ReadHeaderTimeout
// (with or without a TLS handshake) is closed then, and an authenticated
// connection idle between requests is closed after IdleTimeout.
func TestUnauthenticatedConnectionsClosed(t *testing.T) {
	n := startNode(t, kubeletserver.Options{ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond})

	t.Run("After401", func(t *testing.T) {
		c, err := tls.Dial("tcp", n.addr, n.tlsConfig())
		require.NoError(t, err)
		defer c.Close()
		req, err := http.NewRequest(http.MethodGet, n.url+"/healthz", nil)
		require.NoError(t, err)
		require.NoError(t, req.Write(c))
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.True(t, resp.Close, "the answer says the connection closes")
		io.Copy(io.Discard, resp.Body)
		waitClosed(t, c)
	})
	t.Run("NoRequest", func(t *testing.T) {
		c, err := tls.Dial("tcp", n.addr, n.tlsConfig())
		require.NoError(t, err)
		defer c.Close()
		waitClosed(t, c)
	})
	t.Run("NoHandshake", func(t *testing.T) {
		c, err := net.Dial("tcp", n.addr)
		require.NoError(t, err)
		defer c.Close()
		waitClosed(t, c)
	})
	t.Run("IdleAfterRequest", func(t *testing.T) {
		c, err := tls.Dial("tcp", n.addr, n.tlsConfig(n.pki.client))
		require.NoError(t, err)
		defer c.Close()
		req, err := http.NewRequest(http.MethodGet, n.url+"/healthz", nil)
		require.NoError(t, err)
		require.NoError(t, req.Write(c))
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.False(t, resp.Close, "an authenticated connection is kept alive")
		io.Copy(io.Discard, resp.Body)
		waitClosed(t, c)
	})
}

// TestConnectionCap: at MaxConnections open connections, the next one
// is accepted only once one of them closes.
func TestConnectionCap(t *testing.T) {
	n := startNode(t, kubeletserver.Options{MaxStreams: 1, MaxLogReads: 1, MaxConnections: 3})
	var held []net.Conn
	for range 3 {
		c, err := tls.Dial("tcp", n.addr, n.tlsConfig())
		require.NoError(t, err)
		held = append(held, c)
	}
	done := make(chan int, 1)
	go func() {
		resp, err := n.admin().Get(n.url + "/healthz")
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		t.Fatalf("a fourth connection was served (%d) while three were open", code)
	default:
	}
	held[0].Close()
	assert.Equal(t, http.StatusOK, <-done)
	for _, c := range held[1:] {
		c.Close()
	}
}
