package kubeletserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

// fakeStreamer is a runtime whose commands are words of the test:
//   - echo WORDS: WORDS on stdout;
//   - cat: stdin to stdout;
//   - fail CODE: "oops" on stderr, exit CODE;
//   - size: the first terminal size, as WxH;
//   - block: until ctx ends (sent on blocked first, then on ended).
//
// Attach says "attached", then copies stdin to stdout; PortForward
// echoes, prefixed by the port.
type fakeStreamer struct {
	blocked, ended chan string
}

func newFakeStreamer() *fakeStreamer {
	return &fakeStreamer{blocked: make(chan string, 100), ended: make(chan string, 100)}
}

func (f *fakeStreamer) Exec(ctx context.Context, pod *v1.Pod, opts *v1.PodExecOptions, s kubeletserver.Streams) (int, error) {
	switch opts.Command[0] {
	case "echo":
		fmt.Fprintln(s.Stdout, strings.Join(opts.Command[1:], " "))
	case "cat":
		io.Copy(s.Stdout, s.Stdin)
	case "fail":
		fmt.Fprint(s.Stderr, "oops")
		return strconv.Atoi(opts.Command[1])
	case "size":
		size := <-s.Resize
		fmt.Fprintf(s.Stdout, "%dx%d tty=%t", size.Width, size.Height, s.TTY)
	case "block":
		f.blocked <- pod.Name
		<-ctx.Done()
		f.ended <- pod.Name
	default:
		return 0, errors.New("no such command")
	}
	return 0, nil
}

func (f *fakeStreamer) Attach(ctx context.Context, pod *v1.Pod, opts *v1.PodAttachOptions, s kubeletserver.Streams) error {
	fmt.Fprintln(s.Stdout, "attached to", opts.Container)
	if s.Stdin != nil {
		io.Copy(s.Stdout, s.Stdin)
	}
	return nil
}

func (f *fakeStreamer) PortForward(ctx context.Context, pod *v1.Pod, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	fmt.Fprintf(stream, "%d:", port)
	_, err := io.Copy(stream, stream)
	return err
}

func streamingNode(t *testing.T, opts kubeletserver.Options) (*node, *fakeStreamer) {
	f := newFakeStreamer()
	opts.Streaming = f
	if opts.Pods == nil {
		opts.Pods = podsNamed(3).get
	}
	return startNode(t, opts), f
}

// execURL is the kubelet's exec URL of container c of pod p, running
// command, with the streams named (input, output, error, tty).
func execURL(n *node, sub, p string, command []string, streams ...string) string {
	q := url.Values{}
	for _, w := range command {
		q.Add("command", w)
	}
	for _, s := range streams {
		q.Set(s, "1")
	}
	return n.url + "/" + sub + "/ns/" + p + "/c?" + q.Encode()
}

// executors are the two protocols kubectl speaks: SPDY (what the API
// server sends a kubelet) and WebSocket v5 (kubectl's own, which an API
// server passes through to nodes that declare ExtendWebSocketsToKubelet).
func executors(t *testing.T, n *node, rawURL string) map[string]remotecommand.Executor {
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	s, err := remotecommand.NewSPDYExecutor(n.restConfig(), http.MethodPost, u)
	require.NoError(t, err)
	ws, err := remotecommand.NewWebSocketExecutor(n.restConfig(), http.MethodGet, rawURL)
	require.NoError(t, err)
	return map[string]remotecommand.Executor{"SPDY": s, "WebSocket": ws}
}

type fixedSize struct{ sent bool }

func (f *fixedSize) Next() *remotecommand.TerminalSize {
	if f.sent {
		return nil
	}
	f.sent = true
	return &remotecommand.TerminalSize{Width: 120, Height: 40}
}

func TestExec(t *testing.T) {
	n, _ := streamingNode(t, kubeletserver.Options{})
	ctx := context.Background()
	for proto, e := range executors(t, n, execURL(n, "exec", "p0", []string{"echo", "hello", "world"}, "output", "error")) {
		var out, errOut bytes.Buffer
		require.NoError(t, e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}), proto)
		assert.Equal(t, "hello world\n", out.String(), proto)
	}
	for proto, e := range executors(t, n, execURL(n, "exec", "p0", []string{"cat"}, "input", "output", "error")) {
		var out bytes.Buffer
		require.NoError(t, e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &out, Stderr: io.Discard}), proto)
		assert.Equal(t, "typed\n", out.String(), "%s: stdin reaches the command, and its end ends it", proto)
	}
	for proto, e := range executors(t, n, execURL(n, "exec", "p0", []string{"fail", "3"}, "output", "error")) {
		var errOut bytes.Buffer
		err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: &errOut})
		var exitErr exec.CodeExitError
		require.ErrorAs(t, err, &exitErr, proto)
		assert.Equal(t, 3, exitErr.ExitStatus(), "%s: the exit code passes through", proto)
		assert.Equal(t, "oops", errOut.String(), proto)
	}
	for proto, e := range executors(t, n, execURL(n, "exec", "p0", []string{"size"}, "input", "output", "tty")) {
		var out bytes.Buffer
		require.NoError(t, e.StreamWithContext(ctx, remotecommand.StreamOptions{
			Stdin: strings.NewReader(""), Stdout: &out, Tty: true, TerminalSizeQueue: &fixedSize{},
		}), proto)
		assert.Equal(t, "120x40 tty=true", out.String(), proto)
	}
	for proto, e := range executors(t, n, execURL(n, "exec", "p0", []string{"nosuch"}, "output")) {
		err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
		assert.ErrorContains(t, err, "no such command", proto)
	}
}

func TestAttach(t *testing.T) {
	n, _ := streamingNode(t, kubeletserver.Options{})
	for proto, e := range executors(t, n, execURL(n, "attach", "p0", nil, "input", "output", "error")) {
		var out bytes.Buffer
		require.NoError(t, e.StreamWithContext(context.Background(), remotecommand.StreamOptions{
			Stdin: strings.NewReader("typed\n"), Stdout: &out, Stderr: io.Discard,
		}), proto)
		assert.Equal(t, "attached to c\ntyped\n", out.String(), proto)
	}
}

// TestStreamingRefusals: unknown pods, containers and pod UIDs are 404,
// requests without streams or command 400, and the subresource is
// nodes/proxy: an identity with only nodes/metrics and nodes/stats, or
// none, is refused.
func TestStreamingRefusals(t *testing.T) {
	n, _ := streamingNode(t, kubeletserver.Options{})
	c := n.admin()
	for path, want := range map[string]int{
		"/exec/ns/nosuch/c?command=echo&output=1":       http.StatusNotFound,
		"/exec/ns/p0/nosuch?command=echo&output=1":      http.StatusNotFound,
		"/exec/ns/p0/wrong-uid/c?command=echo&output=1": http.StatusNotFound,
		"/exec/ns/p0/uid-p0/c?command=echo":             http.StatusBadRequest,
		"/exec/ns/p0/c?output=1":                        http.StatusBadRequest,
		"/attach/ns/p0/nosuch?output=1":                 http.StatusNotFound,
		"/portForward/ns/nosuch":                        http.StatusNotFound,
		"/portForward/ns/p0/wrong-uid":                  http.StatusNotFound,
	} {
		code, body := get(t, c, n.url+path, "")
		assert.Equal(t, want, code, "%s: %s", path, body)
	}
	for _, token := range []string{tokenScraper, tokenNobody, tokenFail} {
		for _, path := range []string{"/exec/ns/p0/c?command=echo&output=1", "/attach/ns/p0/c?output=1", "/portForward/ns/p0"} {
			code, body := get(t, n.client(), n.url+path, token)
			assert.Equal(t, http.StatusForbidden, code, "%s with %s: %s", path, token, body)
			if token != tokenFail {
				assert.Contains(t, body, "subresource(s)=[proxy]")
			}
		}
	}
	u, err := url.Parse(execURL(n, "exec", "p0", []string{"echo"}, "output"))
	require.NoError(t, err)
	cfg := n.restConfig()
	cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData, cfg.BearerToken = nil, nil, tokenScraper
	e, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	require.NoError(t, err)
	assert.ErrorContains(t, e.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard}), "Forbidden")
}

func TestPortForward(t *testing.T) {
	n, _ := streamingNode(t, kubeletserver.Options{})
	for proto, d := range portForwardDialers(t, n, "/portForward/ns/p0") {
		ports, stop := forwardPorts(t, proto, d, "0:80", "0:8080")
		require.Len(t, ports, 2, proto)
		for _, p := range ports {
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p.Local))))
			require.NoError(t, err, proto)
			_, err = io.WriteString(c, "ping")
			require.NoError(t, err)
			c.(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(c)
			require.NoError(t, err, proto)
			assert.Equal(t, fmt.Sprintf("%d:ping", p.Remote), string(got), proto)
			c.Close()
		}
		stop()
	}
}

// portForwardDialers are the two ways kubectl port-forwards: SPDY, and
// SPDY tunnelled in WebSocket.
func portForwardDialers(t *testing.T, n *node, path string) map[string]httpstream.Dialer {
	u, err := url.Parse(n.url + path)
	require.NoError(t, err)
	transport, upgrader, err := spdy.RoundTripperFor(n.restConfig())
	require.NoError(t, err)
	tunnel, err := portforward.NewSPDYOverWebsocketDialer(u, n.restConfig())
	require.NoError(t, err)
	return map[string]httpstream.Dialer{
		"SPDY":      spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u),
		"WebSocket": tunnel,
	}
}

// forwardPorts forwards ports (local:remote) through d and returns the
// ports forwarded, and a function that stops and checks the session.
func forwardPorts(t *testing.T, proto string, d httpstream.Dialer, ports ...string) ([]portforward.ForwardedPort, func()) {
	stopCh, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(d, []string{"127.0.0.1"}, ports, stopCh, ready, io.Discard, io.Discard)
	require.NoError(t, err, proto)
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		require.FailNow(t, "port-forward ended before it was ready", "%s: %v", proto, err)
	}
	forwarded, err := pf.GetPorts()
	require.NoError(t, err, proto)
	return forwarded, func() {
		close(stopCh)
		require.NoError(t, <-done, proto)
	}
}

// TestStreamsCapped: exec sessions count against the same caps as
// followed logs: per pod, then in all; a refused session is 429 with the
// cap's message.
func TestStreamsCapped(t *testing.T) {
	n, f := streamingNode(t, kubeletserver.Options{MaxStreams: 3, MaxStreamsPerPod: 2, ContainerLogs: newFakeLogs().read})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runCtx := func(ctx context.Context, pod string) error {
		u, err := url.Parse(execURL(n, "exec", pod, []string{"block"}, "output"))
		require.NoError(t, err)
		e, err := remotecommand.NewSPDYExecutor(n.restConfig(), http.MethodPost, u)
		require.NoError(t, err)
		return e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
	}
	run := func(pod string) error { return runCtx(ctx, pod) }
	// refused is a session that should be refused: were it let in, it
	// would block, so it gets a bound (and fails the test) instead.
	refused := func(pod string) error {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return runCtx(ctx, pod)
	}
	errs := make(chan error, 3)
	start := func(pod string) {
		go func() { errs <- run(pod) }()
		<-f.blocked
	}
	start("p0")
	start("p0")
	assert.ErrorContains(t, refused("p0"), "too many long-lived streams (followed logs, exec, attach, port-forward) to this pod at once: at most 2")
	start("p1")
	assert.ErrorContains(t, refused("p2"), "too many long-lived streams (followed logs, exec, attach, port-forward) on this node at once: at most 3")
	code, _, _, msg := follow(t, n.admin(), n, "p2")
	assert.Equal(t, http.StatusTooManyRequests, code, "followed logs share the cap: %s", msg)
	code, body := get(t, n.admin(), n.url+"/containerLogs/ns/p2/c", "")
	assert.Equal(t, http.StatusOK, code, "plain reads keep their own capacity: %s", body)
	cancel()
	for range 3 {
		<-f.ended
		<-errs
	}
}

// TestStreamIdleTimeout: a session that carries nothing for
// StreamIdleTimeout is closed, and its runtime's context ends.
func TestStreamIdleTimeout(t *testing.T) {
	n, f := streamingNode(t, kubeletserver.Options{StreamIdleTimeout: 300 * time.Millisecond})
	u, err := url.Parse(execURL(n, "exec", "p0", []string{"block"}, "output"))
	require.NoError(t, err)
	e, err := remotecommand.NewSPDYExecutor(n.restConfig(), http.MethodPost, u)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		done <- e.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard})
	}()
	<-f.blocked
	assert.Equal(t, "p0", <-f.ended, "the runtime's context ends")
	<-done
}

// TestShutdownEndsSessions: Serve returns with a session open; the
// session's runtime context has ended by then.
func TestShutdownEndsSessions(t *testing.T) {
	n, f := streamingNode(t, kubeletserver.Options{})
	u, err := url.Parse(execURL(n, "exec", "p1", []string{"block"}, "output"))
	require.NoError(t, err)
	e, err := remotecommand.NewSPDYExecutor(n.restConfig(), http.MethodPost, u)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		done <- e.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard})
	}()
	<-f.blocked
	require.NoError(t, n.stop())
	select {
	case pod := <-f.ended:
		assert.Equal(t, "p1", pod)
	default:
		t.Fatal("Serve returned before the session's runtime call")
	}
	<-done
}

// fakeLocator is a StreamLocator whose URLs are given.
type fakeLocator struct {
	exec *url.URL
	err  error
}

func (f *fakeLocator) GetExec(context.Context, *v1.Pod, *v1.PodExecOptions) (*url.URL, error) {
	return f.exec, f.err
}

func (f *fakeLocator) GetAttach(context.Context, *v1.Pod, *v1.PodAttachOptions) (*url.URL, error) {
	return f.exec, f.err
}

func (f *fakeLocator) GetPortForward(context.Context, *v1.Pod, *v1.PodPortForwardOptions) (*url.URL, error) {
	return f.exec, f.err
}

// TestClientLeavingEndsSession: when the client goes away mid-session,
// over either protocol, the runtime's context ends (a command that never
// reads or writes is not left running).
func TestClientLeavingEndsSession(t *testing.T) {
	n, f := streamingNode(t, kubeletserver.Options{})
	for proto, e := range executors(t, n, execURL(n, "exec", "p2", []string{"block"}, "output")) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard}) }()
		<-f.blocked
		cancel()
		select {
		case pod := <-f.ended:
			assert.Equal(t, "p2", pod, proto)
		case <-time.After(closedWithin):
			require.FailNow(t, "the runtime's context did not end", proto)
		}
		<-done
	}
}
