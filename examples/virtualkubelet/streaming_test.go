package virtualkubelet_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
)

// The provider is a whole virtual-kubelet provider: nodeutil.NewNode takes
// it as it is.
var _ nodeutil.Provider = (*vk.Provider)(nil)

// kubeletAPI serves the provider through virtual-kubelet's own handlers
// (node/api.PodHandler, as nodeutil.AttachProviderRoutes wires them).
func kubeletAPI(t *testing.T, p *vk.Provider) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(api.PodHandler(api.PodHandlerConfig{
		RunInContainer:     p.RunInContainer,
		AttachToContainer:  p.AttachToContainer,
		PortForward:        p.PortForward,
		GetContainerLogs:   p.GetContainerLogs,
		GetPods:            p.GetPods,
		GetStatsSummary:    p.GetStatsSummary,
		GetMetricsResource: p.GetMetricsResource,
	}, true))
	t.Cleanup(srv.Close)
	return srv
}

// stream runs one exec or attach session (path: "exec/..." or
// "attach/...") as kubectl does, over SPDY, and returns what came back.
func stream(t *testing.T, srv *httptest.Server, path string, query url.Values, stdin io.Reader, tty bool, sizes remotecommand.TerminalSizeQueue) (string, string, error) {
	t.Helper()
	u, err := url.Parse(srv.URL + "/" + path)
	require.NoError(t, err)
	if stdin != nil {
		query.Set("input", "1")
	}
	query.Set("output", "1")
	if tty {
		query.Set("tty", "1")
	} else {
		query.Set("error", "1")
	}
	u.RawQuery = query.Encode()
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: srv.URL}, "POST", u)
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	opts := remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Tty: tty, TerminalSizeQueue: sizes}
	if !tty {
		opts.Stderr = &stderr
	}
	err = ex.StreamWithContext(context.Background(), opts)
	return stdout.String(), stderr.String(), err
}

func command(args ...string) url.Values { return url.Values{"command": args} }

type oneSize struct{ sent bool }

func (s *oneSize) Next() *remotecommand.TerminalSize {
	if s.sent {
		return nil
	}
	s.sent = true
	return &remotecommand.TerminalSize{Width: 100, Height: 40}
}

func streamingPod() *v1.Pod {
	pod := newPod("web", "uid-web")
	pod.Spec.Containers[0].Stdin = true
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 8080}}
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "GREETING", Value: "hello"}}
	return pod
}

// TestExecThroughVirtualKubeletsHandler: kubectl exec's protocol, through
// virtual-kubelet's handler, to the backend: output, input, a terminal and
// its size, exit codes passed through, and 404s for what is not running.
func TestExecThroughVirtualKubeletsHandler(t *testing.T) {
	d := newDirect(t, false)
	srv := kubeletAPI(t, d.provider)
	require.NoError(t, d.provider.CreatePod(d.ctx, streamingPod()))
	d.eventually("web to run", func() bool { return d.remote("uid-web").Running() })

	out, _, err := stream(t, srv, "exec/default/web/app", command("echo", "hi", "there"), nil, false, nil)
	require.NoError(t, err)
	assert.Equal(t, "hi there\n", out)

	out, _, err = stream(t, srv, "exec/default/web/app", command("env"), nil, false, nil)
	require.NoError(t, err)
	assert.Equal(t, "GREETING=hello\n", out, "the container's environment")

	out, _, err = stream(t, srv, "exec/default/web/app", command("cat"), strings.NewReader("piped in"), false, nil)
	require.NoError(t, err)
	assert.Equal(t, "piped in", out, "stdin reaches the command")

	out, _, err = stream(t, srv, "exec/default/web/app", command("stty", "size"), strings.NewReader(""), true, &oneSize{})
	require.NoError(t, err)
	assert.Equal(t, "40 100\n", strings.ReplaceAll(out, "\r", ""), "the terminal's size reaches the command")

	_, stderr, err := stream(t, srv, "exec/default/web/app", command("sh", "-c", "exit 3"), nil, false, nil)
	var exit utilexec.CodeExitError
	require.True(t, errors.As(err, &exit), "an exit code, not a failure: %v", err)
	assert.Equal(t, 3, exit.Code)
	assert.Empty(t, stderr)

	_, stderr, err = stream(t, srv, "exec/default/web/app", command("frobnicate"), nil, false, nil)
	require.True(t, errors.As(err, &exit), "%v", err)
	assert.Equal(t, 127, exit.Code)
	assert.Contains(t, stderr, "frobnicate: command not found")

	// (virtual-kubelet's handler upgrades the connection before it asks
	// the provider, so the refusal comes as the session's error.)
	_, _, err = stream(t, srv, "exec/default/web/nope", command("echo"), nil, false, nil)
	assert.ErrorContains(t, err, `pod default/web has no container "nope"`)
	_, _, err = stream(t, srv, "exec/default/absent/app", command("echo"), nil, false, nil)
	assert.ErrorContains(t, err, "pod default/absent is not running here")

	// A pod that stopped is not running here any more.
	require.NoError(t, d.provider.DeletePod(d.ctx, deleting(streamingPod(), 1)))
	d.eventually("web to stop", func() bool { return !d.remote("uid-web").Running() })
	d.eventually("exec to be refused", func() bool {
		_, _, err = stream(t, srv, "exec/default/web/app", command("echo"), nil, false, nil)
		return err != nil
	})
}

// TestAttachThroughVirtualKubeletsHandler: kubectl attach -i reaches the
// container's standard input and gets its output back; the session ends
// with the input.
func TestAttachThroughVirtualKubeletsHandler(t *testing.T) {
	d := newDirect(t, false)
	srv := kubeletAPI(t, d.provider)
	require.NoError(t, d.provider.CreatePod(d.ctx, streamingPod()))
	d.eventually("web to run", func() bool { return d.remote("uid-web").Running() })

	out, _, err := stream(t, srv, "attach/default/web/app", url.Values{}, strings.NewReader("typed line\n"), false, nil)
	require.NoError(t, err)
	assert.Contains(t, out, "typed line\n", "the simulated process echoes its input")

	// What was typed is in the container's log, after its start line.
	resp, err := http.Get(srv.URL + "/containerLogs/default/web/app?tailLines=2")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Equal(t, "simcloud: container app started (image nginx:1)\ntyped line\n", string(body))

	// A container without stdin refuses input.
	other := newPod("plain", "uid-plain")
	require.NoError(t, d.provider.CreatePod(d.ctx, other))
	d.eventually("plain to run", func() bool { return d.remote("uid-plain").Running() })
	_, _, err = stream(t, srv, "attach/default/plain/app", url.Values{}, strings.NewReader("x"), false, nil)
	assert.ErrorContains(t, err, "stdin")
}

// TestPortForwardThroughVirtualKubeletsHandler: kubectl port-forward's
// client, through virtual-kubelet's handler, reaches the port a container
// declares (where simcloud echoes); another port is refused.
func TestPortForwardThroughVirtualKubeletsHandler(t *testing.T) {
	d := newDirect(t, false)
	srv := kubeletAPI(t, d.provider)
	require.NoError(t, d.provider.CreatePod(d.ctx, streamingPod()))
	d.eventually("web to run", func() bool { return d.remote("uid-web").Running() })

	var done chan error
	forward := func(remotePort int) (local uint16, stop func() error) {
		u, err := url.Parse(srv.URL + "/portForward/default/web")
		require.NoError(t, err)
		transport, upgrader, err := spdy.RoundTripperFor(&rest.Config{Host: srv.URL})
		require.NoError(t, err)
		dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u)
		stopCh, readyCh := make(chan struct{}), make(chan struct{})
		fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", remotePort)}, stopCh, readyCh, io.Discard, io.Discard)
		require.NoError(t, err)
		done = make(chan error, 1)
		go func() { done <- fw.ForwardPorts() }()
		<-readyCh
		ports, err := fw.GetPorts()
		require.NoError(t, err)
		return ports[0].Local, func() error {
			close(stopCh)
			return <-done
		}
	}

	local, stop := forward(8080)
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", local))
	require.NoError(t, err)
	_, err = conn.Write([]byte("ping"))
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	got, err := io.ReadAll(conn)
	require.NoError(t, err)
	conn.Close()
	assert.Equal(t, "ping", string(got), "the pod's server answered")
	require.NoError(t, stop())

	local, _ = forward(9999)
	conn, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", local))
	require.NoError(t, err)
	got, _ = io.ReadAll(conn)
	conn.Close()
	assert.Empty(t, got, "a port no container declares is refused")
	// The forwarder closes its connection to the pod itself when the
	// pod refuses a port; closing stopCh first would race with that.
	select {
	case err := <-done:
		assert.ErrorIs(t, err, portforward.ErrLostConnectionToPod)
	case <-time.After(time.Minute):
		t.Fatal("the forwarder kept its connection after the pod refused the port")
	}
	calls := d.cloud.Calls(simcloud.OpPortForward)
	require.Len(t, calls, 2)
	assert.NoError(t, calls[0].Err)
	assert.ErrorContains(t, calls[1].Err, "connection refused on port 9999")
}
