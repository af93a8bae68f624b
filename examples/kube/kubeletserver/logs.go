package kubeletserver

import (
	"fmt"
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
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	namespace, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, status, err := ParseLogOptions(r.URL.Query(), time.Now())
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
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		http.Error(w, fmt.Sprintf("too many log requests at once (at most %d)", s.opts.MaxLogStreams), http.StatusTooManyRequests)
		return
	}

	fw := &flushWriter{w: w}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if opts.Follow {
		t := time.AfterFunc(followHeaderDelay, fw.commit)
		defer t.Stop()
	}
	err = s.opts.ContainerLogs(r.Context(), pod, container, opts, fw)
	if !fw.finish(err) && err != nil {
		// The status was sent: the stream just ends.
		s.opts.Logger.V(2).Info("Container log stream ended with an error", "pod", namespace+"/"+name, "container", container, "error", err.Error())
	}
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
// SinceTime, counted back from now. It returns the HTTP status of the
// error: 400 for a value that cannot be read, 422 for values that are
// invalid together or out of range (v1.PodLogOptions' validation).
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
		if err != nil {
			return bad("%s=%q is not an integer", n.name, v)
		}
		if parsed < n.min {
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
		opts.SinceTime = &metav1.Time{Time: now.Add(-time.Duration(*opts.SinceSeconds) * time.Second)}
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
// the client line by line. It is safe for concurrent use; after finish it
// writes nothing more.
type flushWriter struct {
	mu         sync.Mutex
	w          http.ResponseWriter
	sent, done bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return 0, http.ErrHandlerTimeout
	}
	f.sent = true
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
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
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
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
