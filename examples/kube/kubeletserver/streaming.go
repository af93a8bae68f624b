package kubeletserver

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// routeStreaming adds exec, attach and portForward with the kubelet's
// paths (with or without the pod's UID) and methods.
func (s *Server) routeStreaming(mux *http.ServeMux) {
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		for _, p := range []string{"{namespace}/{pod}/{container}", "{namespace}/{pod}/{uid}/{container}"} {
			mux.HandleFunc(m+" /exec/"+p, s.exec)
			mux.HandleFunc(m+" /attach/"+p, s.attach)
		}
		for _, p := range []string{"{namespace}/{pod}", "{namespace}/{pod}/{uid}"} {
			mux.HandleFunc(m+" /portForward/"+p, s.portForward)
		}
	}
}

// exec serves the kubelet's /exec: the API server's pods/exec (kubectl
// exec, cp) proxies to it.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	pod, container, streams, ok := s.remoteCommand(w, r)
	if !ok {
		return
	}
	opts := &v1.PodExecOptions{
		Container: container,
		Command:   r.URL.Query()[remoteCommandParam],
		Stdin:     streams.Stdin, Stdout: streams.Stdout, Stderr: streams.Stderr, TTY: streams.TTY,
	}
	if len(opts.Command) == 0 {
		http.Error(w, "you must specify at least one command for the container", http.StatusBadRequest)
		return
	}
	s.session(w, r, pod.UID, func() (*url.URL, error) { return s.locator.GetExec(r.Context(), pod, opts) }, streams)
}

// remoteCommandParam is the query parameter of an exec's command words.
const remoteCommandParam = "command"

// attach serves the kubelet's /attach (kubectl attach, run -it, debug -it).
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	pod, container, streams, ok := s.remoteCommand(w, r)
	if !ok {
		return
	}
	opts := &v1.PodAttachOptions{
		Container: container,
		Stdin:     streams.Stdin, Stdout: streams.Stdout, Stderr: streams.Stderr, TTY: streams.TTY,
	}
	s.session(w, r, pod.UID, func() (*url.URL, error) { return s.locator.GetAttach(r.Context(), pod, opts) }, streams)
}

// portForward serves the kubelet's /portForward (kubectl port-forward).
// SPDY clients name their ports in their streams; WebSocket clients of
// the channel protocol in the query; tunnelling WebSocket clients carry
// SPDY inside, which the tunnelling handler unwraps.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	tunnel := wsstream.IsWebSocketRequestWithTunnelingProtocol(r)
	ports := &portforward.V4Options{}
	if !tunnel {
		var err error
		if ports, err = portforward.NewV4Options(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	pod, _, ok := s.streamTarget(w, r, false)
	if !ok {
		return
	}
	opts := &v1.PodPortForwardOptions{Ports: ports.Ports}
	s.session(w, r, pod.UID, func() (*url.URL, error) { return s.locator.GetPortForward(r.Context(), pod, opts) }, nil)
}

// remoteCommand reads the streams an exec or attach asks for and finds
// its pod and container, or answers why not (400, 404).
func (s *Server) remoteCommand(w http.ResponseWriter, r *http.Request) (*v1.Pod, string, *remotecommandserver.Options, bool) {
	streams, err := remotecommandserver.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, "", nil, false
	}
	pod, container, ok := s.streamTarget(w, r, true)
	return pod, container, streams, ok
}

// streamTarget finds the pod (and container) of a streaming request, or
// answers 404.
func (s *Server) streamTarget(w http.ResponseWriter, r *http.Request, withContainer bool) (*v1.Pod, string, bool) {
	name := r.PathValue("pod")
	pod, ok := s.opts.Pods(r.PathValue("namespace"), name)
	if uid := r.PathValue("uid"); ok && uid != "" && pod.UID != types.UID(uid) {
		ok = false
	}
	if !ok {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return nil, "", false
	}
	container := r.PathValue("container")
	if withContainer && !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, name), http.StatusNotFound)
		return nil, "", false
	}
	return pod, container, true
}

// session runs one exec, attach or port-forward session of pod uid: it
// takes a stream slot (429 without one), asks locate for the session's
// URL, and proxies the client's connection there, translating a
// WebSocket v5 exec or attach (streams set) to SPDY and unwrapping a
// tunnelled port-forward, as the kubelet does.
func (s *Server) session(w http.ResponseWriter, r *http.Request, uid types.UID, locate func() (*url.URL, error), streams *remotecommandserver.Options) {
	release, err := s.streams.acquire(uid)
	if err != nil {
		tooMany(w, err)
		return
	}
	defer release()
	if !s.sessions.enter() {
		http.Error(w, "the node is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.sessions.leave()
	location, err := locate()
	if err != nil {
		writeLocateError(w, err)
		return
	}
	// The streaming server needs no credential of the client's.
	r = r.Clone(r.Context())
	r.Header.Del("Authorization")

	var h http.Handler = proxy.NewUpgradeAwareHandler(location, s.transport, false, true, proxyResponder{s})
	switch {
	case streams != nil && wsstream.IsWebSocketRequestWithStreamCloseProtocol(r):
		h = translator.NewStreamTranslatorHandler(location, s.transport, 0, translator.Options{
			Stdin: streams.Stdin, Stdout: streams.Stdout, Stderr: streams.Stderr, Tty: streams.TTY,
		})
	case streams == nil && wsstream.IsWebSocketRequestWithTunnelingProtocol(r):
		h = translator.NewTunnelingHandler(h)
	}
	h.ServeHTTP(w, r)
}

// writeLocateError answers a failed StreamLocator call: a gRPC status
// (a CRI runtime's) keeps its meaning, as on the kubelet.
func writeLocateError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	if st, ok := grpcstatus.FromError(err); ok {
		switch st.Code() {
		case codes.NotFound:
			status = http.StatusNotFound
		case codes.ResourceExhausted:
			status = http.StatusTooManyRequests
		case codes.InvalidArgument:
			status = http.StatusBadRequest
		case codes.Unimplemented:
			status = http.StatusNotImplemented
		}
	}
	if errors.Is(err, ErrNotSupported) {
		status = http.StatusNotImplemented
	}
	http.Error(w, err.Error(), status)
}

// proxyResponder reports proxy errors (the streaming server could not be
// reached) to the client and the log.
type proxyResponder struct{ s *Server }

func (p proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	p.s.opts.Logger.Error(err, "Proxying a streaming session", "path", r.URL.Path)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}
