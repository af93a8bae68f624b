package kubeletserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// StatsProvider measures the pods a runtime runs: what the kubelet's
// Summary API (/stats/summary) and resource metrics (/metrics/resource,
// which metrics-server scrapes for kubectl top) report of pods. Called
// from the request's goroutine, concurrently for different requests; ctx
// is the request's. StatsProviderFunc adapts a function.
type StatsProvider interface {
	// PodStats returns one entry per pod the runtime runs, each with its
	// PodRef and StartTime, and per container at least the Name,
	// StartTime, CPU (UsageCoreNanoSeconds: cumulative CPU time) and
	// Memory (WorkingSetBytes) where the runtime measures them; the pod's
	// own CPU and Memory are its containers' (and sandbox's) together. A
	// field the runtime cannot measure stays nil and is left out of the
	// answers, never reported as zero. The slice is the caller's. An
	// error makes /stats/summary answer 500 and /metrics/resource report
	// resource_scrape_error 1 (with the node's figures still).
	PodStats(ctx context.Context) ([]statsapi.PodStats, error)
}

// StatsProviderFunc is a StatsProvider made of a function.
type StatsProviderFunc func(ctx context.Context) ([]statsapi.PodStats, error)

var _ StatsProvider = StatsProviderFunc(nil)

// PodStats calls f.
func (f StatsProviderFunc) PodStats(ctx context.Context) ([]statsapi.PodStats, error) { return f(ctx) }

// routeStats adds /stats/summary, /metrics/resource, /pods and
// /runningpods.
func (s *Server) routeStats(mux *http.ServeMux) {
	mux.HandleFunc("GET /stats/summary", s.statsSummary)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&resourceCollector{s: s})
	mux.Handle("GET /metrics/resource", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      promErrorLog{s.opts.Logger},
		ErrorHandling: promhttp.ContinueOnError,
	}))
	if s.opts.BoundPods != nil {
		mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
			writePodList(w, s.opts.BoundPods())
		})
	}
	if s.opts.RunningPods != nil {
		mux.HandleFunc("GET /runningpods/", s.runningPods)
		mux.HandleFunc("GET /runningpods", s.runningPods)
	}
}

// summary is the node's Summary: its own figures, and its pods' from
// Options.Stats. The node's part is there even when the pods' failed.
func (s *Server) summary(ctx context.Context) (*statsapi.Summary, error) {
	sum := &statsapi.Summary{Node: s.node.read(s.opts.NodeName), Pods: []statsapi.PodStats{}}
	if s.opts.Stats == nil {
		return sum, nil
	}
	pods, err := s.opts.Stats.PodStats(ctx)
	if err != nil {
		return sum, err
	}
	if pods != nil {
		sum.Pods = pods
	}
	return sum, nil
}

// statsSummary serves GET /stats/summary, as the kubelet: the Summary in
// JSON; only_cpu_and_memory=true keeps only those figures.
func (s *Server) statsSummary(w http.ResponseWriter, r *http.Request) {
	onlyCPUAndMemory := false
	if v := r.URL.Query().Get("only_cpu_and_memory"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			http.Error(w, "only_cpu_and_memory="+strconv.Quote(v)+" is not a boolean", http.StatusBadRequest)
			return
		}
		onlyCPUAndMemory = b
	}
	sum, err := s.summary(r.Context())
	if err != nil {
		s.opts.Logger.Error(err, "Reading the pods' stats")
		http.Error(w, "reading the pods' stats: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if onlyCPUAndMemory {
		sum = cpuAndMemoryOnly(sum)
	}
	writeJSON(w, sum)
}

// cpuAndMemoryOnly returns the CPU and memory figures of sum.
func cpuAndMemoryOnly(sum *statsapi.Summary) *statsapi.Summary {
	out := &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: sum.Node.NodeName, StartTime: sum.Node.StartTime, CPU: sum.Node.CPU, Memory: sum.Node.Memory},
		Pods: make([]statsapi.PodStats, len(sum.Pods)),
	}
	for i, p := range sum.Pods {
		q := statsapi.PodStats{PodRef: p.PodRef, StartTime: p.StartTime, CPU: p.CPU, Memory: p.Memory,
			Containers: make([]statsapi.ContainerStats, len(p.Containers))}
		for j, c := range p.Containers {
			q.Containers[j] = statsapi.ContainerStats{Name: c.Name, StartTime: c.StartTime, CPU: c.CPU, Memory: c.Memory}
		}
		out.Pods[i] = q
	}
	return out
}

// runningPods serves GET /runningpods/: the pods the runtime runs.
func (s *Server) runningPods(w http.ResponseWriter, r *http.Request) {
	pods, err := s.opts.RunningPods(r.Context())
	if err != nil {
		http.Error(w, "listing the running pods: "+err.Error(), http.StatusInternalServerError)
		return
	}
	writePodList(w, pods)
}

// writePodList answers a v1 PodList of pods, as the kubelet's /pods.
func writePodList(w http.ResponseWriter, pods []*v1.Pod) {
	list := &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: make([]v1.Pod, 0, len(pods))}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}
