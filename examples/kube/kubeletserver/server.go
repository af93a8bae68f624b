package kubeletserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/utils/clock"
)

// Limits of the connections, as the kubelet's server has them (its
// ReadTimeout, WriteTimeout and IdleTimeout), plus a bound on the time to
// send the headers.
const (
	// DefaultReadHeaderTimeout is the default of
	// Options.ReadHeaderTimeout. It also bounds the TLS handshake.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is the default of Options.IdleTimeout: the
	// kubelet's, and http.DefaultTransport's keep-alive.
	DefaultIdleTimeout = 90 * time.Second
	// ReadTimeout bounds reading a whole request, and so the life of a
	// followed log (whose connection stays in the request), as on the
	// kubelet. Upgraded connections (exec, attach, port-forward) are not
	// bound by it but by Options.StreamIdleTimeout.
	ReadTimeout = 4 * time.Hour
	// WriteTimeout bounds writing a response that is not a followed log
	// (each of whose writes gets Options.StreamIdleTimeout instead).
	WriteTimeout = 4 * time.Hour
	// MaxHeaderBytes bounds the size of a request's headers (and so of
	// its URL: an exec's command, say).
	MaxHeaderBytes = 64 << 10
)

// Defaults of the caps in Options.
const (
	DefaultMaxStreams        = 64
	DefaultMaxStreamsPerPod  = 8
	DefaultMaxLogReads       = 32
	DefaultMaxConnections    = 256
	DefaultStreamIdleTimeout = 4 * time.Hour
	// DefaultStreamCreationTimeout is the default of
	// Options.StreamCreationTimeout: the kubelet's.
	DefaultStreamCreationTimeout = remotecommandserver.DefaultStreamCreationTimeout
)

// shutdownTimeout bounds how long Serve waits for plain requests and
// followed logs in flight once its context ends, before closing them.
const shutdownTimeout = 5 * time.Second

// ContainerLogsFunc writes the log of a container of pod to w, as opts asks
// (its meanings are v1.PodLogOptions'; SinceSeconds has been turned into
// SinceTime, and Stream is nil). With Follow it returns when the container
// has exited and its log is written, or when ctx ends (the client left, the
// stream was idle for Options.StreamIdleTimeout, or the server shuts
// down). An error is reported to the client with status 400, as the
// kubelet does, when nothing was written yet; after that the stream just
// ends. Called from the request's goroutine, concurrently for different
// requests.
type ContainerLogsFunc func(ctx context.Context, pod *v1.Pod, container string, opts *v1.PodLogOptions, w io.Writer) error

// Options configure a Server. NodeName, Certificate, ClientCA, Client and
// Pods are required; every other field says what it defaults to.
type Options struct {
	// NodeName names the Node whose API this is: the Name of the
	// authorization attributes.
	NodeName string
	// Certificate is the serving certificate. It should name the address
	// the Node publishes (an IP SAN for an InternalIP); the API server
	// checks it when started with --kubelet-certificate-authority.
	Certificate tls.Certificate
	// GetCertificate, when set, gives the serving certificate at each TLS
	// handshake, and Certificate is not used, as tls.Config.GetCertificate: a
	// certificate that rotates (package bootstrap's, from the
	// kubernetes.io/kubelet-serving signer). It is called from the
	// server's connection goroutines; an error fails the handshake.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// ClientCA holds the PEM certificates of the CAs whose client
	// certificates identify users (the API server's
	// --kubelet-client-certificate must be signed by one of them).
	ClientCA []byte
	// Client creates the TokenReviews and SubjectAccessReviews. A node
	// identity (system:node:<name>) may.
	Client kubernetes.Interface
	// Pods finds a pod the agent runs by namespace and name; the kubelet's
	// containerLogs, exec, attach and portForward name pods so.
	Pods func(namespace, name string) (*v1.Pod, bool)
	// ContainerLogs reads a container's log. Nil: the agent keeps no logs,
	// and /containerLogs answers 404.
	ContainerLogs ContainerLogsFunc
	// Streaming runs exec, attach and port-forward sessions in this
	// process (the process runtime). StreamURLs instead names the
	// sessions of a runtime's own streaming server (a CRI runtime). At
	// most one of them may be set; with neither, /exec, /attach and
	// /portForward answer 404.
	Streaming  Streamer
	StreamURLs StreamLocator
	// Stats measures the runtime's pods for /stats/summary and
	// /metrics/resource, beside the node's own figures that the Server
	// reads from /proc. Nil: those endpoints answer 404.
	Stats StatsProvider
	// BoundPods lists the pods bound to this node that the agent knows
	// (the kubelet's pod manager), for /pods. Nil: /pods answers 404.
	BoundPods func() []*v1.Pod
	// RunningPods lists the pods the runtime runs, for /runningpods. Nil:
	// /runningpods answers 404.
	RunningPods func(ctx context.Context) ([]*v1.Pod, error)
	// Metrics is served on /metrics. Nil serves an empty registry.
	Metrics prometheus.Gatherer
	// HealthChecks are run by /healthz, besides a ping. Each failing check
	// makes /healthz answer 500 with its name.
	HealthChecks []healthz.HealthChecker

	// MaxStreams caps the long-lived streams served at once: followed
	// logs and exec, attach and port-forward sessions. Defaults to
	// DefaultMaxStreams. More get 429.
	MaxStreams int
	// MaxStreamsPerPod caps, among them, those of one pod (all its
	// containers together): every client arrives as the API server's
	// identity, so the caps count targets. Defaults to
	// DefaultMaxStreamsPerPod (or MaxStreams, if lower); at most
	// MaxStreams.
	MaxStreamsPerPod int
	// MaxLogReads caps the plain (not followed) log reads at once,
	// apart from the streams: capacity the streams cannot take. Defaults
	// to DefaultMaxLogReads. More get 429.
	MaxLogReads int
	// MaxConnections caps the open connections; more wait to be
	// accepted. Defaults to DefaultMaxConnections; it must exceed
	// MaxStreams + MaxLogReads, so that other requests always find one.
	MaxConnections int
	// StreamIdleTimeout ends a stream (a followed log, an exec, attach or
	// port-forward session of Streaming) that carried no data for that
	// long; the kubelet's streamingConnectionIdleTimeout. Sessions of
	// StreamURLs have their runtime's own. Defaults to
	// DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds the time a SPDY client takes to open
	// the streams of a Streaming session. Defaults to
	// DefaultStreamCreationTimeout.
	StreamCreationTimeout time.Duration
	// ReadHeaderTimeout bounds the TLS handshake and the sending of a
	// request's headers; a connection that sends nothing is closed then.
	// Defaults to DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a kept-alive connection idle between requests
	// for that long. Defaults to DefaultIdleTimeout.
	IdleTimeout time.Duration

	// Clock times followed logs (their idle timeout, the sending of
	// their headers) and turns sinceSeconds into a time. Defaults to the
	// real clock. (Connection timeouts are the net package's, on real
	// time.)
	Clock clock.WithDelayedExecution
	// Logger receives the server's errors. Defaults to discarding.
	Logger logr.Logger
}

// withDefaults checks o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.NodeName == "":
		return o, errors.New("kubeletserver: Options.NodeName is required")
	case len(o.Certificate.Certificate) == 0 && o.GetCertificate == nil:
		return o, errors.New("kubeletserver: Options.Certificate or Options.GetCertificate is required")
	case len(o.ClientCA) == 0:
		return o, errors.New("kubeletserver: Options.ClientCA is required")
	case o.Client == nil:
		return o, errors.New("kubeletserver: Options.Client is required")
	case o.Pods == nil:
		return o, errors.New("kubeletserver: Options.Pods is required")
	case o.Streaming != nil && o.StreamURLs != nil:
		return o, errors.New("kubeletserver: Options.Streaming and Options.StreamURLs are both set; a runtime streams one way")
	}
	if o.MaxStreamsPerPod == 0 && o.MaxStreams > 0 {
		o.MaxStreamsPerPod = min(DefaultMaxStreamsPerPod, o.MaxStreams)
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxStreams", &o.MaxStreams, DefaultMaxStreams},
		{"MaxStreamsPerPod", &o.MaxStreamsPerPod, DefaultMaxStreamsPerPod},
		{"MaxLogReads", &o.MaxLogReads, DefaultMaxLogReads},
		{"MaxConnections", &o.MaxConnections, DefaultMaxConnections},
	} {
		if *f.v < 0 {
			return o, fmt.Errorf("kubeletserver: Options.%s is negative (%d); want 0 (the default, %d) or more", f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"StreamIdleTimeout", &o.StreamIdleTimeout, DefaultStreamIdleTimeout},
		{"StreamCreationTimeout", &o.StreamCreationTimeout, DefaultStreamCreationTimeout},
		{"ReadHeaderTimeout", &o.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{"IdleTimeout", &o.IdleTimeout, DefaultIdleTimeout},
	} {
		if *f.v < 0 {
			return o, fmt.Errorf("kubeletserver: Options.%s is negative (%v); want 0 (the default, %v) or more", f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case o.MaxStreamsPerPod > o.MaxStreams:
		return o, fmt.Errorf("kubeletserver: Options.MaxStreamsPerPod (%d) is above MaxStreams (%d)", o.MaxStreamsPerPod, o.MaxStreams)
	case o.MaxConnections <= o.MaxStreams+o.MaxLogReads:
		return o, fmt.Errorf("kubeletserver: Options.MaxConnections (%d) must exceed MaxStreams + MaxLogReads (%d), so that other requests find a connection",
			o.MaxConnections, o.MaxStreams+o.MaxLogReads)
	}
	if o.Metrics == nil {
		o.Metrics = prometheus.NewRegistry()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o, nil
}

// Server is the kubelet API of one node. Create it with New and run it
// with Serve.
type Server struct {
	opts    Options // completed by withDefaults
	handler http.Handler
	errLog  *log.Logger
	// logReads holds a token per plain log read in progress.
	logReads chan struct{}
	streams  *streamSlots
	// locator finds the sessions' URLs: opts.StreamURLs, or local for
	// opts.Streaming; nil without either.
	locator StreamLocator
	// local is the streaming server of opts.Streaming, or nil.
	local *localStreams
	// backends dials the sessions' streaming servers; transport is over
	// it.
	backends  *backends
	transport *http.Transport
	// sessions are the proxied sessions in progress.
	sessions sessionGroup
	node     *nodeStats
}

// New checks opts and returns a Server. It starts nothing.
func New(opts Options) (*Server, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:     opts,
		errLog:   log.New(logWriter{opts.Logger}, "", 0),
		logReads: make(chan struct{}, opts.MaxLogReads),
		streams:  newStreamSlots(opts.MaxStreams, opts.MaxStreamsPerPod),
		node:     newNodeStats(),
	}
	auth, err := newAuthFilter(opts.NodeName, opts.ClientCA, opts.Client, opts.Logger)
	if err != nil {
		return nil, err
	}
	switch {
	case opts.Streaming != nil:
		s.local = newLocalStreams(opts.Streaming, opts.Pods, opts.StreamIdleTimeout, opts.StreamCreationTimeout, s.errLog)
		s.locator = s.local
		s.backends = newBackends(s.local.listener.DialContext)
	case opts.StreamURLs != nil:
		s.locator = opts.StreamURLs
		s.backends = newBackends((&net.Dialer{Timeout: 30 * time.Second}).DialContext)
	}
	if s.backends != nil {
		s.transport = s.backends.transport()
	}

	mux := http.NewServeMux()
	if opts.ContainerLogs != nil {
		mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	}
	if s.locator != nil {
		s.routeStreaming(mux)
	}
	s.routeStats(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Metrics, promhttp.HandlerOpts{
		ErrorLog:      promErrorLog{opts.Logger},
		ErrorHandling: promhttp.ContinueOnError,
	}))
	healthz.InstallHandler(mux, append([]healthz.HealthChecker{healthz.PingHealthz}, opts.HealthChecks...)...)
	s.handler = auth.wrap(mux)
	return s, nil
}

// certificates is the static serving certificate, if any. With
// GetCertificate set there is none: crypto/tls asks GetCertificate only
// when Certificates is empty or the client sent a server name, which a
// client dialing an IP (the API server) does not.
func (s *Server) certificates() []tls.Certificate {
	if s.opts.GetCertificate != nil || len(s.opts.Certificate.Certificate) == 0 {
		return nil
	}
	return []tls.Certificate{s.opts.Certificate}
}

// Serve serves HTTPS on l until ctx ends, then shuts down: it stops
// accepting, ends the streams (their contexts end, their connections are
// closed), waits up to a few seconds for plain requests in flight, closes
// the rest, and waits for every handler to return. It returns nil after a
// clean shutdown, or the listener's error. It closes l. At most
// Options.MaxConnections connections of l are open at once. Call it
// once, from a goroutine of its own.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          s.errLog,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			Certificates:   s.certificates(),
			GetCertificate: s.opts.GetCertificate,
			// The certificate is verified by the authenticator, against
			// the client CA; a request without one may still carry a
			// bearer token.
			ClientAuth: tls.RequestClientCert,
		},
	}
	localDone := make(chan struct{})
	if s.local != nil {
		go func() {
			defer close(localDone)
			s.local.serve(ctx)
		}()
	} else {
		close(localDone)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(netutil.LimitListener(l, s.opts.MaxConnections), "", "") }()
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	// Streams first: followed logs end with ctx; proxied sessions end
	// when their streaming servers' connections close.
	if s.backends != nil {
		s.backends.closeAll()
	}
	if s.local != nil {
		s.local.close()
	}
	<-localDone
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	s.sessions.closeAndWait()
	if serveErr == nil {
		serveErr = <-errc
	}
	if !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("kubeletserver: serving: %w", serveErr)
	}
	return nil
}

// logWriter sends the HTTP server's log lines (TLS handshake failures,
// mostly) to a logr.Logger at verbosity 2.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.V(2).Info("kubelet API server", "message", strings.TrimSpace(string(p)))
	return len(p), nil
}

// promErrorLog sends promhttp's errors to a logr.Logger.
type promErrorLog struct{ log logr.Logger }

func (l promErrorLog) Println(v ...any) {
	l.log.Error(nil, "serving metrics", "error", fmt.Sprint(v...))
}
