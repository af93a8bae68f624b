package kubeletserver

import (
	"context"
	"errors"
	"io"
	"net/url"

	v1 "k8s.io/api/core/v1"
)

// DeclaredFeatures are what a node serving this package's API declares
// in its Node's status.declaredFeatures, as a kubelet 1.37 does:
// ExtendWebSocketsToKubelet, since the Server speaks kubectl's WebSocket
// protocols itself (see "Usage" in the package doc).
var DeclaredFeatures = []string{"ExtendWebSocketsToKubelet"}

// ErrNotSupported is wrapped by the error of a Streamer or StreamLocator
// method its runtime does not offer (attach without the container's stdin
// held, say). The client is told the message.
var ErrNotSupported = errors.New("kubeletserver: not supported by this runtime")

// TerminalSize is a terminal's size in characters, as the client's
// terminal is resized (kubectl exec -it).
type TerminalSize struct {
	Width, Height uint16
}

// Streams are the client's ends of an exec or attach session. Only what
// the client asked for is set: Stdin is nil without stdin, Stdout and
// Stderr are nil when not asked for (Stderr always with TTY, where the
// terminal carries both), Resize is nil without TTY. The runtime copies
// between them and the process until the process exits or ctx ends; it
// must not use them after returning.
type Streams struct {
	// Stdin reads what the client types or pipes; it returns io.EOF when
	// the client closes its input (kubectl exec -i ... < file).
	Stdin io.Reader
	// Stdout and Stderr carry the process's output to the client. A
	// write fails once the client is gone.
	Stdout, Stderr io.Writer
	// TTY asks for a terminal: the process gets a pseudo-terminal, whose
	// output goes to Stdout.
	TTY bool
	// Resize delivers the terminal's size, first the initial one, then
	// each change; it is closed when the session ends.
	Resize <-chan TerminalSize
}

// Streamer runs exec, attach and port-forward sessions for a runtime
// whose processes this agent reaches itself (the process runtime). The
// Server speaks the protocols (SPDY and WebSocket, with the kubelet's own
// libraries) and calls these with plain streams, each from a goroutine of
// the session, concurrently for different sessions. ctx ends when the
// client leaves or the Server shuts down. StreamerFuncs adapts functions.
type Streamer interface {
	// Exec runs opts.Command in container opts.Container of pod, as the
	// container runs (its namespaces, identity, environment, working
	// directory, cgroup), with s, and returns the command's exit code
	// once it has exited. An error means the command could not be run
	// (or was lost) and is reported to the client; the exit code is then
	// ignored.
	Exec(ctx context.Context, pod *v1.Pod, opts *v1.PodExecOptions, s Streams) (exitCode int, err error)
	// Attach connects s to the running main process of container
	// opts.Container of pod (its stdin and terminal when the container
	// has stdin: true or tty: true, its output otherwise) until ctx ends
	// or the process exits. Leaving does not stop the process.
	Attach(ctx context.Context, pod *v1.Pod, opts *v1.PodAttachOptions, s Streams) error
	// PortForward copies between stream and a new connection to TCP port
	// of pod, on the network the pod uses, until either side closes or
	// ctx ends; it closes stream. One call per forwarded connection.
	PortForward(ctx context.Context, pod *v1.Pod, port int32, stream io.ReadWriteCloser) error
}

// StreamerFuncs is a Streamer made of functions; a nil function answers
// with ErrNotSupported.
type StreamerFuncs struct {
	ExecFunc        func(ctx context.Context, pod *v1.Pod, opts *v1.PodExecOptions, s Streams) (int, error)
	AttachFunc      func(ctx context.Context, pod *v1.Pod, opts *v1.PodAttachOptions, s Streams) error
	PortForwardFunc func(ctx context.Context, pod *v1.Pod, port int32, stream io.ReadWriteCloser) error
}

var _ Streamer = StreamerFuncs{}

// Exec calls ExecFunc.
func (f StreamerFuncs) Exec(ctx context.Context, pod *v1.Pod, opts *v1.PodExecOptions, s Streams) (int, error) {
	if f.ExecFunc == nil {
		return 0, errors.Join(ErrNotSupported, errors.New("exec"))
	}
	return f.ExecFunc(ctx, pod, opts, s)
}

// Attach calls AttachFunc.
func (f StreamerFuncs) Attach(ctx context.Context, pod *v1.Pod, opts *v1.PodAttachOptions, s Streams) error {
	if f.AttachFunc == nil {
		return errors.Join(ErrNotSupported, errors.New("attach"))
	}
	return f.AttachFunc(ctx, pod, opts, s)
}

// PortForward calls PortForwardFunc.
func (f StreamerFuncs) PortForward(ctx context.Context, pod *v1.Pod, port int32, stream io.ReadWriteCloser) error {
	if f.PortForwardFunc == nil {
		stream.Close()
		return errors.Join(ErrNotSupported, errors.New("port-forward"))
	}
	return f.PortForwardFunc(ctx, pod, port, stream)
}

// StreamLocator is a runtime with a streaming server of its own, as a CRI
// runtime has (its Exec, Attach and PortForward calls return the URL of a
// one-time session): the Server asks for the URL and proxies the client's
// connection to it, as the kubelet does. Called from the request's
// goroutine, concurrently for different requests; ctx is the request's.
// An error is reported to the client (a gRPC status keeps its code's
// HTTP meaning: NotFound is 404, and so on). *cri.Syncer implements it.
type StreamLocator interface {
	// GetExec returns the URL that runs opts.Command in container
	// opts.Container of pod with the streams opts asks for.
	GetExec(ctx context.Context, pod *v1.Pod, opts *v1.PodExecOptions) (*url.URL, error)
	// GetAttach returns the URL that attaches to container opts.Container
	// of pod.
	GetAttach(ctx context.Context, pod *v1.Pod, opts *v1.PodAttachOptions) (*url.URL, error)
	// GetPortForward returns the URL that forwards opts.Ports of pod
	// (empty: the ports the client names in its streams).
	GetPortForward(ctx context.Context, pod *v1.Pod, opts *v1.PodPortForwardOptions) (*url.URL, error)
}
