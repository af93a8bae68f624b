package kubeletserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// followHeaderDelay is how long a followed log may stay silent before the
// response headers are sent anyway, so the client (and the API server
// between) sees the stream open. Errors found before then still get a
// status code.
const followHeaderDelay = 500 * time.Millisecond

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}.
// A followed log is a long-lived stream (Options.MaxStreams,
// MaxStreamsPerPod, StreamIdleTimeout); a plain one is a log read
// (Options.MaxLogReads), which streams cannot starve.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	namespace, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, status, err := ParseLogOptions(r.URL.Query(), s.opts.Clock.Now())
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	pod, ok := s.opts.Pods(namespace, name)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, name), http.StatusNotFound)
		return
	}
	ctx := r.Context()
	fw := &flushWriter{w: w, rc: http.NewResponseController(w)}
	if opts.Follow {
		release, err := s.streams.acquire(pod.UID)
		if err != nil {
			tooMany(w, err)
			return
		}
		defer release()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		idle := newIdleTimer(s.opts.Clock, s.opts.StreamIdleTimeout, cancel)
		defer idle.stop()
		fw.idle, fw.writeTimeout = idle, s.opts.StreamIdleTimeout
		t := s.opts.Clock.AfterFunc(followHeaderDelay, fw.commit)
		defer t.Stop()
	} else {
		select {
		case s.logReads <- struct{}{}:
			defer func() { <-s.logReads }()
		default:
			tooMany(w, fmt.Errorf("too many log reads on this node at once: at most %d", s.opts.MaxLogReads))
			return
		}
	}

	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	err = s.opts.ContainerLogs(ctx, pod, container, opts, fw)
	if !fw.finish(err) && err != nil {
		// The status was sent: the stream just ends.
		s.opts.Logger.V(2).Info("Container log stream ended with an error", "pod", namespace+"/"+name, "container", container, "error", err.Error())
	}
}

// tooMany answers 429 with err's message.
func tooMany(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, err.Error(), http.StatusTooManyRequests)
}

// hasContainer says whether pod has a container (of any kind) named name.
func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// ParseLogOptions reads the query of a containerLogs request, as the
// kubelet does: the fields of v1.PodLogOptions by their JSON names, plus
// the legacy tail (a count, or "all"). sinceSeconds is turned into
// SinceTime, counted back from now; a window reaching back past the Unix
// epoch saturates to the whole log (SinceTime nil). tailLines and
// limitBytes take any count up to the largest int64, which means all of
// the log. It returns the HTTP status of the error: 400 for a value that
// cannot be read or is out of that range, 422 for values that are
// invalid together or below their minimum (v1.PodLogOptions'
// validation, as the kubelet answers).
func ParseLogOptions(q url.Values, now time.Time) (*v1.PodLogOptions, int, error) {
	opts := &v1.PodLogOptions{}
	bad := func(format string, args ...any) (*v1.PodLogOptions, int, error) {
		return nil, http.StatusBadRequest, fmt.Errorf(format, args...)
	}
	invalid := func(format string, args ...any) (*v1.PodLogOptions, int, error) {
		return nil, http.StatusUnprocessableEntity, fmt.Errorf(format, args...)
	}
	for _, b := range []struct {
		name string
		to   *bool
	}{{"follow", &opts.Follow}, {"previous", &opts.Previous}, {"timestamps", &opts.Timestamps}} {
		if v := q.Get(b.name); v != "" {
			parsed, err := strconv.ParseBool(v)
			if err != nil {
				return bad("%s=%q is not a boolean", b.name, v)
			}
			*b.to = parsed
		}
	}
	ints := []struct {
		name string
		to   **int64
		min  int64
	}{{"tailLines", &opts.TailLines, 0}, {"limitBytes", &opts.LimitBytes, 1}, {"sinceSeconds", &opts.SinceSeconds, 1}}
	if tail := q.Get("tail"); tail != "" && tail != "all" && q.Get("tailLines") == "" {
		q = cloneWith(q, "tailLines", tail)
	}
	for _, n := range ints {
		v := q.Get(n.name)
		if v == "" {
			continue
		}
		parsed, err := strconv.ParseInt(v, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange) && parsed > 0:
			return bad("%s=%s is out of range: at most %d", n.name, v, int64(math.MaxInt64))
		case errors.Is(err, strconv.ErrRange):
			return invalid("%s must be at least %d, got %s", n.name, n.min, v)
		case err != nil:
			return bad("%s=%q is not an integer", n.name, v)
		case parsed < n.min:
			return invalid("%s must be at least %d, got %d", n.name, n.min, parsed)
		}
		*n.to = ptr.To(parsed)
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return bad("sinceTime=%q is not an RFC 3339 time", v)
		}
		opts.SinceTime = &metav1.Time{Time: t}
	}
	if opts.SinceSeconds != nil && opts.SinceTime != nil {
		return invalid("at most one of sinceTime or sinceSeconds may be specified")
	}
	if opts.SinceSeconds != nil {
		// A Duration holds 292 years: count back in seconds, and saturate
		// at the epoch, before which no log was written.
		if since := *opts.SinceSeconds; since < now.Unix() {
			opts.SinceTime = &metav1.Time{Time: now.Add(-time.Duration(since) * time.Second)}
		}
		opts.SinceSeconds = nil
	}
	if v := q.Get("stream"); v != "" && v != v1.LogStreamAll {
		// The process runtime keeps one log per container, stdout and
		// stderr together.
		return bad("unable to return the log stream %q: only %q is kept", v, v1.LogStreamAll)
	}
	return opts, 0, nil
}

func cloneWith(q url.Values, key, value string) url.Values {
	c := make(url.Values, len(q)+1)
	for k, v := range q {
		c[k] = v
	}
	c.Set(key, value)
	return c
}

// flushWriter sends the response headers (200) on the first write, or
// when commit is called, and flushes every write so a followed log reaches
// the client line by line. For a followed log, each write counts as
// activity for the idle timer and may block at most writeTimeout (a
// client that stops reading is an idle one). It is safe for concurrent
// use; after finish it writes nothing more.
type flushWriter struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	idle         *idleTimer    // nil for a plain read
	writeTimeout time.Duration // with idle

	mu         sync.Mutex
	sent, done bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	if f.idle != nil {
		// Before the write, so that a client that has read it finds the
		// stream active; and outside f.mu: reading the time takes a fake
		// clock's lock, which the clock holds while it calls commit (an
		// AfterFunc), which takes f.mu.
		f.idle.activity()
	}
	return f.write(p)
}

func (f *flushWriter) write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return 0, http.ErrHandlerTimeout
	}
	f.sent = true
	if f.idle != nil {
		// Errors: the writer cannot have deadlines (a test's recorder).
		_ = f.rc.SetWriteDeadline(time.Now().Add(f.writeTimeout))
	}
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}

// commit sends the headers now, if nothing was written yet.
func (f *flushWriter) commit() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent || f.done {
		return
	}
	f.sent = true
	f.w.WriteHeader(http.StatusOK)
	_ = f.rc.Flush()
}

// finish ends the response: with err, as a 400 if no status was sent yet
// (it then returns true). Nothing is written after it.
func (f *flushWriter) finish(err error) (reported bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = true
	if err == nil || f.sent {
		return false
	}
	f.sent = true
	http.Error(f.w, err.Error(), http.StatusBadRequest)
	return true
}
