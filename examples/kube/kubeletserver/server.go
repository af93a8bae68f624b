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
	v1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
)

const (
	// ReadHeaderTimeout bounds the time a client may take to send a
	// request's headers.
	ReadHeaderTimeout = 10 * time.Second
	// MaxHeaderBytes bounds the size of a request's headers.
	MaxHeaderBytes = 64 << 10
	// DefaultMaxLogStreams is the default of Options.MaxLogStreams.
	DefaultMaxLogStreams = 64
	// shutdownTimeout bounds how long Serve waits for requests in flight
	// (followed logs) once its context ends, before closing them.
	shutdownTimeout = 5 * time.Second
)

// ContainerLogsFunc writes the log of a container of pod to w, as opts asks
// (its meanings are v1.PodLogOptions'; SinceSeconds has been turned into
// SinceTime, and Stream is nil). With Follow it returns when the container
// has exited and its log is written, or when ctx ends (the client left). An
// error is reported to the client with status 400, as the kubelet does,
// when nothing was written yet; after that the stream just ends.
type ContainerLogsFunc func(ctx context.Context, pod *v1.Pod, container string, opts *v1.PodLogOptions, w io.Writer) error

// Options configure a Server. NodeName, Certificate, ClientCA, Client and
// Pods are required.
type Options struct {
	// NodeName names the Node whose API this is: the Name of the
	// authorization attributes.
	NodeName string
	// Certificate is the serving certificate. It should name the address
	// the Node publishes (an IP SAN for an InternalIP); the API server
	// checks it when started with --kubelet-certificate-authority.
	Certificate tls.Certificate
	// ClientCA holds the PEM certificates of the CAs whose client
	// certificates identify users (the API server's
	// --kubelet-client-certificate must be signed by one of them).
	ClientCA []byte
	// Client creates the TokenReviews and SubjectAccessReviews. A node
	// identity (system:node:<name>) may.
	Client kubernetes.Interface
	// Pods finds a pod the agent runs by namespace and name; the kubelet's
	// containerLogs names pods so.
	Pods func(namespace, name string) (*v1.Pod, bool)
	// ContainerLogs reads a container's log. Nil: the agent keeps no logs,
	// and /containerLogs answers 404.
	ContainerLogs ContainerLogsFunc
	// Metrics is served on /metrics. Nil serves an empty registry.
	Metrics prometheus.Gatherer
	// HealthChecks are run by /healthz, besides a ping. Each failing check
	// makes /healthz answer 500 with its name.
	HealthChecks []healthz.HealthChecker
	// MaxLogStreams caps the log requests served at once. Defaults to
	// DefaultMaxLogStreams.
	MaxLogStreams int
	// Logger receives the server's errors. Defaults to discarding.
	Logger logr.Logger
}

// Server is the kubelet API of one node. Create it with New and run it
// with Serve.
type Server struct {
	opts    Options
	handler http.Handler
	streams chan struct{}
}

// New checks opts and returns a Server. It starts nothing.
func New(opts Options) (*Server, error) {
	switch {
	case opts.NodeName == "":
		return nil, errors.New("kubeletserver: Options.NodeName is required")
	case len(opts.Certificate.Certificate) == 0:
		return nil, errors.New("kubeletserver: Options.Certificate is required")
	case len(opts.ClientCA) == 0:
		return nil, errors.New("kubeletserver: Options.ClientCA is required")
	case opts.Client == nil:
		return nil, errors.New("kubeletserver: Options.Client is required")
	case opts.Pods == nil:
		return nil, errors.New("kubeletserver: Options.Pods is required")
	case opts.MaxLogStreams < 0:
		return nil, fmt.Errorf("kubeletserver: Options.MaxLogStreams is negative (%d)", opts.MaxLogStreams)
	}
	if opts.MaxLogStreams == 0 {
		opts.MaxLogStreams = DefaultMaxLogStreams
	}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
	}
	s := &Server{opts: opts, streams: make(chan struct{}, opts.MaxLogStreams)}
	auth, err := newAuthFilter(opts.NodeName, opts.ClientCA, opts.Client, opts.Logger)
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	if opts.ContainerLogs != nil {
		mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Metrics, promhttp.HandlerOpts{
		ErrorLog:      promErrorLog{opts.Logger},
		ErrorHandling: promhttp.ContinueOnError,
	}))
	healthz.InstallHandler(mux, append([]healthz.HealthChecker{healthz.PingHealthz}, opts.HealthChecks...)...)
	s.handler = auth.wrap(mux)
	return s, nil
}

// Handler returns the server's handler, authentication and authorization
// included, for a caller that runs its own listener. It expects TLS
// requests that carry the client's certificates (tls.RequestClientCert).
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves HTTPS on l until ctx ends, then shuts down: it stops
// accepting, waits up to a few seconds for requests in flight, and closes
// the rest. It returns nil after a clean shutdown, or the listener's
// error. It closes l. Call it once, from a goroutine of its own.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: ReadHeaderTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          log.New(logWriter{s.opts.Logger}, "", 0),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{s.opts.Certificate},
			// The certificate is verified by the authenticator, against
			// the client CA; a request without one may still carry a
			// bearer token.
			ClientAuth: tls.RequestClientCert,
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(l, "", "") }()
	select {
	case err := <-errc:
		return fmt.Errorf("kubeletserver: serving: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kubeletserver: serving: %w", err)
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
