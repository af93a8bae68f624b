//go:build linux

package podnet

import (
	"context"
	"io"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// DialLoopback reaches the pod's own loopback, not the host's at the same
// port, and leaves every thread in the host's namespace.
func TestDialLoopbackReachesThePodsLoopback(t *testing.T) {
	requireNetAdmin(t)
	ctx := context.Background()
	n := newTestNetwork(t, testOptions(t))
	_, err := n.Attach(ctx, "pod-a", "")
	require.NoError(t, err)
	ns := n.NetnsPath("pod-a")
	host := serveIn(t, "", "127.0.0.1:0", "from the host\n")
	serveIn(t, ns, host.String(), "from the pod\n")

	conn, err := DialLoopback(ctx, ns, uint16(host.Port))
	require.NoError(t, err)
	got, err := io.ReadAll(conn)
	conn.Close()
	require.NoError(t, err)
	assert.Equal(t, "from the pod\n", string(got))
	requireThreadsInHostNetns(t)

	closed := serveIn(t, "", "127.0.0.1:0", "only the host listens here\n")
	_, err = DialLoopback(ctx, ns, uint16(closed.Port))
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "nothing of the pod listens there")
	_, err = DialLoopback(ctx, "/nonexistent", 80)
	assert.ErrorContains(t, err, "podnet: network namespace /nonexistent")
	requireThreadsInHostNetns(t)
	require.NoError(t, n.Detach(ctx, "pod-a"))
}
