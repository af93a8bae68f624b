package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// logWriteTimeout bounds each write of a log response: a client that stops
// reading for that long ends its response, rather than holding the handler
// (and its follow) forever.
const logWriteTimeout = 30 * time.Second

// maxLogStreams bounds the log responses the agent serves at once (each
// holds about 100 KiB of buffers, and a follow lasts as long as its
// container); more get 429 Too Many Requests.
const maxLogStreams = 64

// logParams are the query parameters of GET /pods/{uid}/logs/{container},
// named as the kubelet's (v1.PodLogOptions).
var logParams = []string{"follow", "previous", "timestamps", "tailLines", "sinceSeconds", "sinceTime", "limitBytes"}

// logsHandler serves GET /pods/{uid}/logs/{container}: the container's log
// as text, as `kubectl logs` shows it, with the query parameters follow,
// previous, timestamps (true or false), tailLines (>= 0), sinceSeconds
// (> 0) or sinceTime (RFC 3339), and limitBytes (> 0). A follow streams
// each line as it is logged until the container instance ends or the
// client goes away. Bad parameters get 400, an unknown pod or container
// (or no previous instance) 404, each with a message saying why; beyond
// limit responses at once, 429.
func (s *podServer) logsHandler(limit int) http.HandlerFunc {
	streams := make(chan struct{}, limit)
	return func(w http.ResponseWriter, req *http.Request) {
		select {
		case streams <- struct{}{}:
			defer func() { <-streams }()
		default:
			http.Error(w, fmt.Sprintf("nodeagent: %d log requests are being served already; try again later", limit), http.StatusTooManyRequests)
			return
		}
		s.serveLogs(w, req)
	}
}

// serveLogs serves one logs request (see logsHandler).
func (s *podServer) serveLogs(w http.ResponseWriter, req *http.Request) {
	uid, container := types.UID(req.PathValue("uid")), req.PathValue("container")
	opts, err := parseLogQuery(req.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, "nodeagent: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	lw := &logResponse{w: w, rc: http.NewResponseController(w)}
	err = s.rt.ReadLogs(req.Context(), uid, container, opts, lw)
	switch {
	case err == nil, lw.wrote:
		// Once the text has begun, an error can only end it.
		return
	case errors.Is(err, processruntime.ErrLogsNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	case errors.Is(err, processruntime.ErrInvalidLogOptions):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away.
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// parseLogQuery turns the query of a logs request into LogOptions; now
// anchors sinceSeconds. Unknown, repeated or malformed parameters are
// errors naming the parameter.
func parseLogQuery(q url.Values, now time.Time) (processruntime.LogOptions, error) {
	var opts processruntime.LogOptions
	for k, vs := range q {
		if !slices.Contains(logParams, k) {
			return opts, fmt.Errorf("unknown parameter %q (want %s)", k, strings.Join(logParams, ", "))
		}
		if len(vs) > 1 {
			return opts, fmt.Errorf("parameter %s is given %d times", k, len(vs))
		}
	}
	var err error
	boolean := func(name string, dst *bool) {
		if v, ok := q[name]; ok && err == nil {
			if *dst, err = strconv.ParseBool(v[0]); err != nil {
				err = fmt.Errorf("%s=%q: want true or false", name, v[0])
			}
		}
	}
	integer := func(name string, minimum int64, what string) *int64 {
		v, ok := q[name]
		if !ok || err != nil {
			return nil
		}
		n, perr := strconv.ParseInt(v[0], 10, 64)
		if perr != nil || n < minimum {
			err = fmt.Errorf("%s=%q: want %s", name, v[0], what)
			return nil
		}
		return &n
	}
	boolean("follow", &opts.Follow)
	boolean("previous", &opts.Previous)
	boolean("timestamps", &opts.Timestamps)
	opts.TailLines = integer("tailLines", 0, "a number of lines, 0 or more")
	opts.LimitBytes = integer("limitBytes", 1, "a number of bytes, 1 or more")
	sinceSeconds := integer("sinceSeconds", 1, "a number of seconds, 1 or more")
	if err != nil {
		return opts, err
	}
	if v, ok := q["sinceTime"]; ok {
		if sinceSeconds != nil {
			return opts, errors.New("give at most one of sinceSeconds and sinceTime")
		}
		t, err := time.Parse(time.RFC3339, v[0])
		if err != nil {
			return opts, fmt.Errorf("sinceTime=%q: want an RFC 3339 time such as 2026-12-01T08:00:00Z", v[0])
		}
		opts.SinceTime = &t
	}
	if sinceSeconds != nil && *sinceSeconds <= math.MaxInt64/int64(time.Second) {
		// Longer ago than a Duration can say is all of the log.
		t := now.Add(-time.Duration(*sinceSeconds) * time.Second)
		opts.SinceTime = &t
	}
	return opts, nil
}

// logResponse is the writer ReadLogs writes a response through: each write
// has logWriteTimeout to complete, and Flush sends what is buffered.
type logResponse struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote bool
}

func (l *logResponse) Write(p []byte) (int, error) {
	l.wrote = true
	_ = l.rc.SetWriteDeadline(time.Now().Add(logWriteTimeout))
	return l.w.Write(p)
}

// Flush sends what the response buffers to the client (the status first:
// it cannot change afterwards).
func (l *logResponse) Flush() error {
	l.wrote = true
	_ = l.rc.SetWriteDeadline(time.Now().Add(logWriteTimeout))
	err := l.rc.Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}
