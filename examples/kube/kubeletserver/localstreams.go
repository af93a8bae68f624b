package kubeletserver

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"path"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// localHost is the host of the URLs localStreams hands out: they are
// only ever dialled through its in-memory listener.
const localHost = "streams.kubeletserver.invalid"

// localStreams is the streaming server of a Streamer, as a CRI runtime
// has one of its own: it serves exec, attach and port-forward sessions
// with the kubelet's CRI streaming libraries (SPDY and WebSocket up to
// v4.channel.k8s.io), on an in-memory listener that only the Server's
// proxy dials, and returns their URLs (StreamLocator). The Server proxies
// clients to it exactly as it proxies them to a CRI runtime's server,
// translating WebSocket v5 and port-forward tunnelling on the way.
type localStreams struct {
	streamer        Streamer
	pods            func(namespace, name string) (*v1.Pod, bool)
	idleTimeout     time.Duration
	creationTimeout time.Duration
	listener        *memListener
	server          *http.Server
	// sessions are the handlers running; close waits for them.
	sessions sessionGroup
}

var _ StreamLocator = (*localStreams)(nil)

func newLocalStreams(streamer Streamer, pods func(namespace, name string) (*v1.Pod, bool), idleTimeout, creationTimeout time.Duration, errLog *log.Logger) *localStreams {
	l := &localStreams{
		streamer:        streamer,
		pods:            pods,
		idleTimeout:     idleTimeout,
		creationTimeout: creationTimeout,
		listener:        newMemListener(),
	}
	mux := http.NewServeMux()
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", l.serveExec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", l.serveAttach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", l.servePortForward)
	}
	l.server = &http.Server{
		Handler:     mux,
		ErrorLog:    errLog,
		ConnContext: l.listener.connContext,
	}
	return l
}

// serve serves until close, with ctx as the sessions' base context
// (their runtimes' contexts end with it). Call it once, from a goroutine
// of its own; it returns after close (at once if close came first).
func (l *localStreams) serve(ctx context.Context) {
	l.server.BaseContext = func(net.Listener) context.Context { return ctx }
	l.server.Serve(l.listener) // returns once closed
}

// close stops serving, closes every session's connection (their
// handlers' contexts end) and waits for the handlers to return.
func (l *localStreams) close() {
	l.server.Close()
	l.listener.closeAll()
	l.sessions.closeAndWait()
}

// transport dials the in-memory listener.
func (l *localStreams) transport() *http.Transport {
	return &http.Transport{DialContext: l.listener.DialContext, DisableKeepAlives: true}
}

func (l *localStreams) url(p string, query url.Values) *url.URL {
	return &url.URL{Scheme: "http", Host: localHost, Path: p, RawQuery: query.Encode()}
}

// GetExec returns the local URL of an exec session.
func (l *localStreams) GetExec(_ context.Context, pod *v1.Pod, opts *v1.PodExecOptions) (*url.URL, error) {
	q := streamQuery(opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY)
	q["command"] = opts.Command
	return l.url(path.Join("/exec", pod.Namespace, pod.Name, string(pod.UID), opts.Container), q), nil
}

// GetAttach returns the local URL of an attach session.
func (l *localStreams) GetAttach(_ context.Context, pod *v1.Pod, opts *v1.PodAttachOptions) (*url.URL, error) {
	q := streamQuery(opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY)
	return l.url(path.Join("/attach", pod.Namespace, pod.Name, string(pod.UID), opts.Container), q), nil
}

// GetPortForward returns the local URL of a port-forward session.
func (l *localStreams) GetPortForward(_ context.Context, pod *v1.Pod, opts *v1.PodPortForwardOptions) (*url.URL, error) {
	q := url.Values{}
	for _, p := range opts.Ports {
		q.Add(portforward.PortHeader, fmt.Sprint(p))
	}
	return l.url(path.Join("/portForward", pod.Namespace, pod.Name, string(pod.UID)), q), nil
}

// streamQuery is the query of the streams asked for, as remotecommand
// reads it.
func streamQuery(stdin, stdout, stderr, tty bool) url.Values {
	q := url.Values{}
	for name, set := range map[string]bool{
		remotecommandserver.ExecStdinParam:  stdin,
		remotecommandserver.ExecStdoutParam: stdout,
		remotecommandserver.ExecStderrParam: stderr,
		remotecommandserver.ExecTTYParam:    tty,
	} {
		if set {
			q.Set(name, "1")
		}
	}
	return q
}

// begin counts a session in and finds the pod of its local URL, by name
// and UID (a pod re-created with the same name since the URL was made is
// not it), or answers why not. The caller calls leave when done.
func (l *localStreams) begin(w http.ResponseWriter, r *http.Request) (pod *v1.Pod, leave func(), ok bool) {
	if !l.sessions.enter() {
		http.Error(w, "the node is shutting down", http.StatusServiceUnavailable)
		return nil, nil, false
	}
	pod, ok = l.pods(r.PathValue("namespace"), r.PathValue("pod"))
	if !ok || pod.UID != types.UID(r.PathValue("uid")) {
		l.sessions.leave()
		http.Error(w, fmt.Sprintf("pod %q does not exist", r.PathValue("pod")), http.StatusNotFound)
		return nil, nil, false
	}
	return pod, l.sessions.leave, true
}

func (l *localStreams) serveExec(w http.ResponseWriter, r *http.Request) {
	pod, leave, ok := l.begin(w, r)
	if !ok {
		return
	}
	defer leave()
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	remotecommandserver.ServeExec(w, r, executor{l.streamer, pod}, pod.Name, string(pod.UID), r.PathValue("container"),
		r.URL.Query()["command"], opts, l.idleTimeout, l.creationTimeout, remotecommandserver.SupportedStreamingProtocols)
}

func (l *localStreams) serveAttach(w http.ResponseWriter, r *http.Request) {
	pod, leave, ok := l.begin(w, r)
	if !ok {
		return
	}
	defer leave()
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	remotecommandserver.ServeAttach(w, r, attacher{l.streamer, pod}, pod.Name, string(pod.UID), r.PathValue("container"),
		opts, l.idleTimeout, l.creationTimeout, remotecommandserver.SupportedStreamingProtocols)
}

func (l *localStreams) servePortForward(w http.ResponseWriter, r *http.Request) {
	pod, leave, ok := l.begin(w, r)
	if !ok {
		return
	}
	defer leave()
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, portForwarder{l.streamer, pod}, pod.Name, string(pod.UID), opts,
		l.idleTimeout, l.creationTimeout, portforward.SupportedProtocols)
}

// executor adapts a Streamer to the remotecommand library, for one pod.
type executor struct {
	streamer Streamer
	pod      *v1.Pod
}

func (e executor) ExecInContainer(ctx context.Context, _, _, container string, cmd []string, in io.Reader, out, errOut io.WriteCloser,
	tty bool, resize <-chan remotecommandserver.TerminalSize, _ time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := streams(ctx, in, out, errOut, tty, resize)
	code, err := e.streamer.Exec(ctx, e.pod, &v1.PodExecOptions{
		Container: container, Command: cmd,
		Stdin: in != nil, Stdout: out != nil, Stderr: errOut != nil, TTY: tty,
	}, s)
	switch {
	case err != nil:
		return err
	case code != 0:
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}

// attacher adapts a Streamer to the remotecommand library, for one pod.
type attacher struct {
	streamer Streamer
	pod      *v1.Pod
}

func (a attacher) AttachContainer(ctx context.Context, _, _, container string, in io.Reader, out, errOut io.WriteCloser,
	tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return a.streamer.Attach(ctx, a.pod, &v1.PodAttachOptions{
		Container: container, Stdin: in != nil, Stdout: out != nil, Stderr: errOut != nil, TTY: tty,
	}, streams(ctx, in, out, errOut, tty, resize))
}

// portForwarder adapts a Streamer to the portforward library, for one pod.
type portForwarder struct {
	streamer Streamer
	pod      *v1.Pod
}

func (p portForwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	return p.streamer.PortForward(ctx, p.pod, port, stream)
}

// streams converts the library's streams; the resize events are
// forwarded until ctx ends or the library closes its channel.
func streams(ctx context.Context, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) Streams {
	s := Streams{Stdin: in, Stdout: out, Stderr: errOut, TTY: tty}
	if tty && resize != nil {
		sizes := make(chan TerminalSize)
		s.Resize = sizes
		go func() {
			defer close(sizes)
			for {
				select {
				case size, ok := <-resize:
					if !ok {
						return
					}
					select {
					case sizes <- TerminalSize{Width: size.Width, Height: size.Height}:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return s
}
