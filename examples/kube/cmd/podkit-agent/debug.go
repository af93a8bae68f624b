package main

import (
	"context"
	"errors"
	"expvar"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// The debug endpoints (--debug-address): Go's profiles and a few counters,
// for whoever measures the agent on its machine. They are served without
// authentication, so only on a loopback address.
//
//	/debug/pprof/   the net/http/pprof profiles (heap, goroutine, profile, ...)
//	/debug/vars     expvar: memstats, cmdline, goroutines, and apiRequests,
//	                the requests the agent sent to the API server by verb
//	                and resource ("GET pods", "WATCH secrets", ...)

// listenDebug checks that addr is a loopback host:port and listens on it.
func listenDebug(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-address: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--debug-address: %q is not a loopback address (the debug endpoints have no authentication)", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-address: %w", err)
	}
	return l, nil
}

// serveDebug serves the debug endpoints on l until ctx ends, with requests
// published as apiRequests; it returns when the server has stopped.
func serveDebug(ctx context.Context, l net.Listener, requests *requestCounter, log logr.Logger) {
	vars := new(expvar.Map).Init()
	vars.Set("goroutines", expvar.Func(func() any { return runtime.NumGoroutine() }))
	vars.Set("apiRequests", expvar.Func(func() any { return requests.snapshot() }))
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/vars", func(w http.ResponseWriter, r *http.Request) {
		// expvar's own handler, plus the agent's counters under "agent".
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprintf(w, "{\n%q: %s", "agent", vars.String())
		expvar.Do(func(kv expvar.KeyValue) { fmt.Fprintf(w, ",\n%q: %s", kv.Key, kv.Value) })
		fmt.Fprintf(w, "\n}\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "The debug endpoints stopped")
		}
	}()
	log.Info("Serving the debug endpoints", "address", l.Addr().String())
	<-ctx.Done()
	_ = srv.Close()
	<-done
}

// requestCounter counts the requests through a client's transport, by
// verb and resource.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// wrap is a rest.Config.WrapTransport that counts through c.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.add(requestKind(req))
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[kind]++
}

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts)+1)
	total := 0
	for k, n := range c.counts {
		out[k] = n
		total += n
	}
	out["total"] = total
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestKind is "VERB resource" of an API request: its method (WATCH for
// a GET with watch=true) and the resource of its path (pods, secrets,
// pods/status, ...; the path itself for what is not a resource).
func requestKind(req *http.Request) string {
	verb := req.Method
	if req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	}
	return verb + " " + pathResource(req.URL.Path)
}

// pathResource is the resource (and subresource) of an API path:
// /api/v1/namespaces/ns/pods/name/status is pods/status.
func pathResource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return path
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + strings.Join(parts[2:], "/")
	}
}
