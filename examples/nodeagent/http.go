package main

import (
	"encoding/json"
	"net/http"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

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
	State                string  `json:"state"`
	Stage                string  `json:"stage"`
	Started              bool    `json:"started"`
	TerminationRequested bool    `json:"terminationRequested"`
	TerminationStarted   bool    `json:"terminationStarted"`
	Finished             bool    `json:"finished"`
	Deleted              bool    `json:"deleted"`
	Evicted              bool    `json:"evicted"`
	RestartRequested     bool    `json:"restartRequested"`
	Static               bool    `json:"static"`
	RuntimeOnly          bool    `json:"runtimeOnly"`
	GracePeriod          int64   `json:"gracePeriod"`
	Working              bool    `json:"working"`
	Pod                  *v1.Pod `json:"pod,omitempty"`
	MirrorPod            *v1.Pod `json:"mirrorPod,omitempty"`
}

// podView is one pod in /pods.
type podView struct {
	UID      types.UID  `json:"uid"`
	Name     string     `json:"name,omitempty"`
	FullName string     `json:"fullName"`
	Window   windowView `json:"window"`
	// Worker is the engine's snapshot; null once the engine forgot the pod
	// (and for pods admission rejected, which never reach it).
	Worker *workerView `json:"worker"`
	// Status is the pod's status as the kubelet would report it.
	Status *v1.PodStatus `json:"status,omitempty"`
}

// podsResponse is the body of /pods.
type podsResponse struct {
	Node string    `json:"node"`
	Pods []podView `json:"pods"`
}

// httpHandler serves /pods (every pod's window, PodInfo and status, as
// JSON), /pods/{uid}/logs/{container} (a container's log, http_logs.go)
// and /healthz.
func (a *agent) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /pods/{uid}/logs/{container}", a.serveLogs)
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(a.podsView())
	})
	return mux
}

// podsView gathers every pod the agent or the engine knows.
func (a *agent) podsView() podsResponse {
	views := map[types.UID]*podView{}
	for _, info := range a.workers.Pods() {
		views[info.UID] = &podView{UID: info.UID, FullName: info.FullName, Worker: workerOf(info)}
		if info.Pod != nil {
			views[info.UID].Name = info.Pod.Namespace + "/" + info.Pod.Name
		}
	}
	a.mu.Lock()
	for uid, rec := range a.pods {
		v := views[uid]
		if v == nil {
			v = &podView{UID: uid, FullName: rec.fullName}
			views[uid] = v
		}
		if v.Name == "" {
			v.Name = rec.name
		}
		if st, ok := rec.apiStatus(); ok {
			v.Status = &st
		}
	}
	a.mu.Unlock()
	out := podsResponse{Node: a.opts.nodeName, Pods: make([]podView, 0, len(views))}
	for uid, v := range views {
		v.Window = windowView{
			IsPodKnownTerminated:             a.workers.IsPodKnownTerminated(uid),
			CouldHaveRunningContainers:       a.workers.CouldHaveRunningContainers(uid),
			ShouldPodBeFinished:              a.workers.ShouldPodBeFinished(uid),
			IsPodTerminationRequested:        a.workers.IsPodTerminationRequested(uid),
			ShouldPodContainersBeTerminating: a.workers.ShouldPodContainersBeTerminating(uid),
			ShouldPodRuntimeBeRemoved:        a.workers.ShouldPodRuntimeBeRemoved(uid),
			ShouldPodContentBeRemoved:        a.workers.ShouldPodContentBeRemoved(uid),
		}
		out.Pods = append(out.Pods, *v)
	}
	sort.Slice(out.Pods, func(i, j int) bool {
		if out.Pods[i].Name != out.Pods[j].Name {
			return out.Pods[i].Name < out.Pods[j].Name
		}
		return out.Pods[i].UID < out.Pods[j].UID
	})
	return out
}

func workerOf(info podworker.PodInfo) *workerView {
	return &workerView{
		State:                info.State.String(),
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
		Pod:                  info.Pod,
		MirrorPod:            info.MirrorPod,
	}
}
