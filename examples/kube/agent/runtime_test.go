package agent

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podkit/podkit/examples/kube/hollowruntime"
	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

func TestParseRuntime(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Runtime
		wantErr bool
	}{
		{in: "", want: RuntimeProcess},
		{in: "process", want: RuntimeProcess},
		{in: "hollow", want: RuntimeHollow},
		{in: "Hollow", wantErr: true},
		{in: "kwok", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRuntime(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), `"hollow"`, "the error names the runtimes there are")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestNewChecksTheRuntime(t *testing.T) {
	client := fake.NewClientset()
	t.Run("unknown runtime", func(t *testing.T) {
		_, err := New(Config{Client: client, NodeName: "n", StateDir: t.TempDir(), Runtime: "kwok"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `"kwok"`)
	})
	t.Run("the process runtime needs a state directory", func(t *testing.T) {
		_, err := New(Config{Client: client, NodeName: "n"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "StateDir")
	})
	t.Run("the hollow runtime needs none", func(t *testing.T) {
		a, err := New(Config{Client: client, NodeName: "n", Runtime: RuntimeHollow})
		require.NoError(t, err)
		defer a.Close()
		c, hostAccess := a.Containment()
		assert.False(t, c.Sandbox)
		assert.Contains(t, c.Network, "hollow")
		assert.False(t, hostAccess)
	})
}

// TestHollowSessionsNotSupported: the kubelet API's sessions on a hollow
// container fail as not supported (the server answers 501), with the
// hollow runtime's reason; a port-forward's stream is closed, as a
// Streamer must.
func TestHollowSessionsNotSupported(t *testing.T) {
	rt, err := hollowruntime.New(hollowruntime.Options{})
	require.NoError(t, err)
	defer rt.Close()
	s := runtimeStreamer(rt)
	ctx := context.Background()
	pod := &v1.Pod{}
	notSupported := func(t *testing.T, err error) {
		t.Helper()
		assert.ErrorIs(t, err, kubeletserver.ErrNotSupported)
		assert.ErrorIs(t, err, hollowruntime.ErrNoProcesses)
	}
	_, err = s.Exec(ctx, pod, &v1.PodExecOptions{Container: "c", Command: []string{"true"}}, kubeletserver.Streams{})
	notSupported(t, err)
	notSupported(t, s.Attach(ctx, pod, &v1.PodAttachOptions{Container: "c"}, kubeletserver.Streams{}))

	local, remote := net.Pipe()
	defer remote.Close()
	notSupported(t, s.PortForward(ctx, pod, 80, local))
	_, err = remote.Read(make([]byte, 1))
	assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe), "the stream was closed: %v", err)

	// Logs are not a session: the error is the runtime's, as it is.
	err = containerLogs(rt)(ctx, pod, "c", &v1.PodLogOptions{}, io.Discard)
	assert.ErrorIs(t, err, hollowruntime.ErrNoProcesses)
}
