package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// What one client of the HTTP endpoint can cost the agent, with
// httpTimeouts. The endpoint has no authentication, so it listens on
// loopback only unless --listen-non-loopback says otherwise.
const (
	// httpMaxHeaderBytes bounds a request's headers.
	httpMaxHeaderBytes = 16 << 10
	// httpMaxInFlight is how many pod requests are served at once; more
	// get 503 Service Unavailable with Retry-After.
	httpMaxInFlight = 16
	// defaultPodsLimit and maxPodsLimit are the default and largest page
	// of /pods (?limit=N; larger values are clamped).
	defaultPodsLimit = 100
	maxPodsLimit     = 500
)

// httpTimeouts are the endpoint's timeouts: a request's headers must
// arrive within readHeader, and the whole request within read; the
// response must be written within write (a client that stops reading is
// disconnected then); an idle kept-alive connection is closed after idle.
type httpTimeouts struct {
	readHeader, read, write, idle time.Duration
}

// defaultHTTPTimeouts are the agent's; tests shorten them.
var defaultHTTPTimeouts = httpTimeouts{
	readHeader: 5 * time.Second,
	read:       10 * time.Second,
	write:      30 * time.Second,
	idle:       60 * time.Second,
}

// windowView is the pod workers' window for one UID: what every other loop
// of an agent asks instead of keeping its own idea of the pod.
type windowView struct {
	IsPodKnownTerminated             bool `json:"isPodKnownTerminated"`
	CouldHaveRunningContainers       bool `json:"couldHaveRunningContainers"`
	ShouldPodBeFinished              bool `json:"shouldPodBeFinished"`
	IsPodTerminationRequested        bool `json:"isPodTerminationRequested"`
	ShouldPodContainersBeTerminating bool `json:"shouldPodContainersBeTerminating"`
	ShouldPodRuntimeBeRemoved        bool `json:"shouldPodRuntimeBeRemoved"`
	ShouldPodContentBeRemoved        bool `json:"shouldPodContentBeRemoved"`
}

// workerView is a podworker.PodInfo in JSON.
type workerView struct {
	Stage                string `json:"stage"`
	Started              bool   `json:"started"`
	TerminationRequested bool   `json:"terminationRequested"`
	TerminationStarted   bool   `json:"terminationStarted"`
	Finished             bool   `json:"finished"`
	Deleted              bool   `json:"deleted"`
	Evicted              bool   `json:"evicted"`
	RestartRequested     bool   `json:"restartRequested"`
	Static               bool   `json:"static"`
	RuntimeOnly          bool   `json:"runtimeOnly"`
	GracePeriod          int64  `json:"gracePeriod"`
	Working              bool   `json:"working"`

	// Pod and MirrorPod are the desired pod and its mirror pod as the
	// worker last acted on them, redacted (redactPod) and without their
	// status: a config source's copy of the status (a static pod's is
	// always Pending) is not the pod's status, which podView.Status is.
	Pod       *v1.Pod `json:"pod,omitempty"`
	MirrorPod *v1.Pod `json:"mirrorPod,omitempty"`
}

// podView is one pod in /pods and /pods/{uid}.
type podView struct {
	UID      types.UID  `json:"uid"`
	Name     string     `json:"name,omitempty"`
	FullName string     `json:"fullName"`
	Window   windowView `json:"window"`
	// Worker is the engine's snapshot; null once the engine forgot the pod
	// (and for pods admission rejected, which never reach it).
	Worker *workerView `json:"worker"`
	// Status is the pod's status as the kubelet would report it, derived
	// from what the runtime observed (or admission's rejection): the only
	// status served.
	Status *v1.PodStatus `json:"status,omitempty"`
}

// podsResponse is the body of /pods: one page of pods, sorted by name and
// UID. Continue, when set, is passed as ?continue= to get the next page.
type podsResponse struct {
	Node     string    `json:"node"`
	Pods     []podView `json:"pods"`
	Continue string    `json:"continue,omitempty"`
}

// errorResponse is the body of an error.
type errorResponse struct {
	Error string `json:"error"`
}

// checkListenAddress refuses to serve the unauthenticated endpoint on
// anything but a loopback address, unless allowed (--listen-non-loopback).
// addr is the address the listener got (so a host name is resolved, and
// ":8080", which listens on every interface, is refused).
func checkListenAddress(addr net.Addr, allowed bool) error {
	if allowed {
		return nil
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err == nil && ap.Addr().IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s is not a loopback address, and the endpoint has no authentication: listen on 127.0.0.1 or [::1], or pass --listen-non-loopback to serve every pod's spec to whoever can reach it", addr)
}

// podServer is the agent's HTTP endpoint (--listen): each pod's window,
// PodInfo and status, and its containers' logs, read from the pod
// workers, the agent's records and the runtime. As a lifecycle.Runnable it
// serves until the agent stops. Its methods are safe for concurrent use.
type podServer struct {
	node     string
	log      logr.Logger
	records  *podRecords
	workers  *podworker.PodWorkers[processruntime.PodStatus]
	rt       *processruntime.Runtime
	listener net.Listener
	// slots holds a value per pod request being served (at most
	// httpMaxInFlight); timeouts are the server's.
	slots    chan struct{}
	timeouts httpTimeouts
}

// newPodServer returns the endpoint over l (which it closes when Run
// returns).
func newPodServer(node string, l net.Listener, records *podRecords, workers *podworker.PodWorkers[processruntime.PodStatus], rt *processruntime.Runtime, log logr.Logger) *podServer {
	return &podServer{
		node: node, log: log, records: records, workers: workers, rt: rt, listener: l,
		slots:    make(chan struct{}, httpMaxInFlight),
		timeouts: defaultHTTPTimeouts,
	}
}

// Run serves on the listener until ctx ends, then shuts the server down,
// giving the requests in flight two seconds.
func (s *podServer) Run(ctx context.Context) error {
	srv := s.newHTTPServer()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(s.listener) }()
	select {
	case err := <-done:
		return fmt.Errorf("the HTTP server stopped: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("the HTTP server stopped: %w", err)
	}
	return nil
}

// newHTTPServer returns the server of the agent's endpoint, with its
// timeouts and limits.
func (s *podServer) newHTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.httpHandler(),
		ReadHeaderTimeout: s.timeouts.readHeader,
		ReadTimeout:       s.timeouts.read,
		WriteTimeout:      s.timeouts.write,
		IdleTimeout:       s.timeouts.idle,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
}

// httpHandler serves /healthz, /pods (a page of pods: each one's window,
// PodInfo and status, as JSON; ?limit=N, ?continue=TOKEN), /pods/{uid}
// (one pod) and /pods/{uid}/logs/{container} (a container's log,
// http_logs.go, which sets its own write deadline per write). Secret-shaped values are redacted (redactPod). The pod
// endpoints stream their JSON, one pod at a time, and serve at most
// httpMaxInFlight requests at once.
func (s *podServer) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /pods", s.limited(s.servePods))
	mux.HandleFunc("GET /pods/{uid}", s.limited(s.servePod))
	mux.HandleFunc("GET /pods/{uid}/logs/{container}", s.logsHandler(maxLogStreams))
	return mux
}

// limited serves with h while fewer than httpMaxInFlight pod requests are
// being served, and with 503 otherwise.
func (s *podServer) limited(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
			h(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			writeJSONError(w, http.StatusServiceUnavailable, "too many requests in flight; retry later")
		}
	}
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(errorResponse{Error: msg})
}

// podKey orders the pods of /pods, and is what a continue token holds.
type podKey struct {
	Name string    `json:"n"`
	UID  types.UID `json:"u"`
}

func (k podKey) less(o podKey) bool {
	if k.Name != o.Name {
		return k.Name < o.Name
	}
	return k.UID < o.UID
}

func (k podKey) token() string {
	b, _ := json.Marshal(k)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseToken(s string) (podKey, error) {
	var k podKey
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &k)
	}
	if err != nil || k.UID == "" {
		return podKey{}, errors.New("invalid continue token")
	}
	return k, nil
}

// servePods serves one page of /pods.
func (s *podServer) servePods(w http.ResponseWriter, r *http.Request) {
	limit := defaultPodsLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a positive number (at most %d are served)", s, maxPodsLimit))
			return
		}
		limit = min(n, maxPodsLimit)
	}
	keys := s.podKeys()
	start := 0
	if s := r.URL.Query().Get("continue"); s != "" {
		after, err := parseToken(s)
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, err.Error())
			return
		}
		start = sort.Search(len(keys), func(i int) bool { return after.less(keys[i]) })
	}
	page := keys[start:min(start+limit, len(keys))]
	next := ""
	if start+len(page) < len(keys) {
		next = page[len(page)-1].token()
	}

	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	head, _ := json.Marshal(s.node)
	fmt.Fprintf(bw, "{\n  \"node\": %s,\n  \"pods\": [", head)
	written := 0
	for _, k := range page {
		v, ok := s.podView(k.UID)
		if !ok {
			continue // forgotten meanwhile
		}
		b, err := json.MarshalIndent(v, "    ", "  ")
		if err != nil {
			s.log.Error(err, "Encoding a pod for /pods failed", "pod", k.UID)
			continue
		}
		if written > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n    ")
		if _, err := bw.Write(b); err != nil {
			return // the client is gone, or too slow (write timeout)
		}
		written++
	}
	if written > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]")
	if next != "" {
		tok, _ := json.Marshal(next)
		fmt.Fprintf(bw, ",\n  \"continue\": %s", tok)
	}
	bw.WriteString("\n}\n")
	_ = bw.Flush()
}

// servePod serves /pods/{uid}.
func (s *podServer) servePod(w http.ResponseWriter, r *http.Request) {
	uid := types.UID(r.PathValue("uid"))
	v, ok := s.podView(uid)
	if !ok {
		writeJSONError(w, http.StatusNotFound, fmt.Sprintf("no pod with UID %q", uid))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// podKeys returns the keys of every pod the agent or the engine knows,
// sorted.
func (s *podServer) podKeys() []podKey {
	names := map[types.UID]string{}
	for _, info := range s.workers.Pods() {
		names[info.UID] = ""
		if info.Pod != nil {
			names[info.UID] = info.Pod.Namespace + "/" + info.Pod.Name
		}
	}
	for uid, name := range s.records.names() {
		if names[uid] == "" {
			names[uid] = name
		}
	}
	keys := make([]podKey, 0, len(names))
	for uid, name := range names {
		keys = append(keys, podKey{Name: name, UID: uid})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].less(keys[j]) })
	return keys
}

// podView gathers what the agent and the engine know of one pod, redacted;
// false when neither knows it.
func (s *podServer) podView(uid types.UID) (podView, bool) {
	v := podView{UID: uid}
	info, inEngine := s.workers.Pod(uid)
	if inEngine {
		v.FullName, v.Worker = info.FullName, workerOf(info)
		if info.Pod != nil {
			v.Name = info.Pod.Namespace + "/" + info.Pod.Name
		}
	}
	recorded := s.records.view(uid, func(rec *podRecord) {
		if v.FullName == "" {
			v.FullName = rec.fullName
		}
		if v.Name == "" {
			v.Name = rec.name
		}
		if st, ok := rec.apiStatus(); ok {
			v.Status = &st
		}
	})
	if !inEngine && !recorded {
		return podView{}, false
	}
	v.Window = windowView{
		IsPodKnownTerminated:             s.workers.IsPodKnownTerminated(uid),
		CouldHaveRunningContainers:       s.workers.CouldHaveRunningContainers(uid),
		ShouldPodBeFinished:              s.workers.ShouldPodBeFinished(uid),
		IsPodTerminationRequested:        s.workers.IsPodTerminationRequested(uid),
		ShouldPodContainersBeTerminating: s.workers.ShouldPodContainersBeTerminating(uid),
		ShouldPodRuntimeBeRemoved:        s.workers.ShouldPodRuntimeBeRemoved(uid),
		ShouldPodContentBeRemoved:        s.workers.ShouldPodContentBeRemoved(uid),
	}
	return v, true
}

func workerOf(info podworker.PodInfo) *workerView {
	return &workerView{
		Stage:                info.Stage.String(),
		Started:              info.Started,
		TerminationRequested: info.TerminationRequested,
		TerminationStarted:   info.TerminationStarted,
		Finished:             info.Finished,
		Deleted:              info.Deleted,
		Evicted:              info.Evicted,
		RestartRequested:     info.RestartRequested,
		Static:               info.Static,
		RuntimeOnly:          info.RuntimeOnly,
		GracePeriod:          info.GracePeriod,
		Working:              info.Working,
		Pod:                  redactPod(info.Pod),
		MirrorPod:            redactPod(info.MirrorPod),
	}
}
