package main

import (
	"context"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// The agent keeps a record per pod it knows (for its output, /pods and
// the summary) only while the pod is known somewhere else: in config, to
// the engine, or to the runtime. Once it is known nowhere, housekeeping
// prunes its record (podRecords.prune), and what is left of the pod in the
// agent is its departed line: the row it had in the summary, kept for the
// latest maxDeparted pods (older ones are only counted). The runtime's
// tombstone of a pod (its logs and final states) lives while config has
// the pod, and is pruned with it (agent.pruneTombstones).

// maxDeparted is how many pods that left the node keep their line in the
// summary.
const maxDeparted = 100

// podRecord is what the agent remembers of one pod, for its output, the
// /pods endpoint and the summary.
type podRecord struct {
	uid       types.UID
	name      string // namespace/name
	fullName  string
	static    bool
	firstSeen time.Time
	// pod is the latest desired pod known.
	pod *v1.Pod
	// rejected is the status admission gave the pod, nil if admitted.
	rejected *v1.PodStatus
	// runtime is the runtime's latest view of the pod.
	runtime    processruntime.PodStatus
	hasRuntime bool
	stage      podworker.Stage
	// maxStage is the furthest stage the pod's worker reached in this life
	// of the UID.
	maxStage podworker.Stage
	// When termination was requested (or the pod finished on its own),
	// when its containers were known stopped, and when it was cleaned up,
	// in this life of the UID.
	termRequested, terminated, finished time.Time
	// termReason says why the pod was terminated.
	termReason string
}

// departedPod is the summary line of a pod whose record was pruned.
type departedPod struct {
	firstSeen time.Time
	row       summaryRow
}

// apiStatus is the pod's status as the kubelet would derive it. A pod
// known only from the runtime (left over from a previous run) is read
// against a stand-in spec made of the containers the runtime has.
func (r *podRecord) apiStatus() (v1.PodStatus, bool) {
	switch {
	case r.rejected != nil:
		return *r.rejected, true
	case !r.hasRuntime:
		return v1.PodStatus{}, false
	case r.pod == nil:
		pod := &v1.Pod{}
		for _, c := range r.runtime.InitContainers {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: c.Name})
		}
		for _, c := range r.runtime.Containers {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c.Name})
		}
		return processruntime.APIStatus(pod, r.runtime), true
	}
	return processruntime.APIStatus(r.pod, r.runtime), true
}

// setPod records the desired pod of r.
func (r *podRecord) setPod(pod *v1.Pod) {
	if pod == nil {
		return
	}
	r.pod = pod
	r.name = pod.Namespace + "/" + pod.Name
	r.fullName = mirror.PodFullName(pod)
	r.static = mirror.IsStaticPod(pod)
}

// newLife forgets what r knew of an earlier life of its UID (the UID was
// terminated, and now runs again): its termination times, its status and
// its rejection.
func (r *podRecord) newLife(stage podworker.Stage) {
	r.termRequested, r.terminated, r.finished = time.Time{}, time.Time{}, time.Time{}
	r.termReason = ""
	r.maxStage = stage
	r.rejected = nil
	r.runtime, r.hasRuntime = processruntime.PodStatus{}, false
}

// podRecords holds the agent's records, and tells waiters of every change.
// Its methods are safe for concurrent use; the functions they are given
// run under its lock and must not call back into it.
type podRecords struct {
	mu   sync.Mutex
	pods map[types.UID]*podRecord
	// podsPeak is the most records pods held since it was last rebuilt.
	podsPeak int
	// departed are the summary lines of the latest pods whose records were
	// pruned (at most maxDeparted, oldest first); departedDropped counts
	// the older ones.
	departed        []departedPod
	departedDropped int
	// changed is closed and replaced whenever a record changes.
	changed chan struct{}
}

func newPodRecords() *podRecords {
	return &podRecords{pods: map[types.UID]*podRecord{}, changed: make(chan struct{})}
}

// edit calls fn with the record of uid, made if there is none, and tells
// the waiters.
func (rs *podRecords) edit(uid types.UID, fn func(r *podRecord)) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.pods[uid]
	if r == nil {
		r = &podRecord{uid: uid, firstSeen: time.Now()}
		rs.pods[uid] = r
		rs.podsPeak = max(rs.podsPeak, len(rs.pods))
	}
	fn(r)
	rs.notifyLocked()
}

// view calls fn with the record of uid and reports whether there is one.
func (rs *podRecords) view(uid types.UID, fn func(r *podRecord)) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.pods[uid]
	if r == nil {
		return false
	}
	fn(r)
	return true
}

// has reports whether uid has a record.
func (rs *podRecords) has(uid types.UID) bool {
	return rs.view(uid, func(*podRecord) {})
}

// names returns the namespace/name of every record.
func (rs *podRecords) names() map[types.UID]string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make(map[types.UID]string, len(rs.pods))
	for uid, r := range rs.pods {
		out[uid] = r.name
	}
	return out
}

// stageReached returns a condition: the worker of uid reached stage (it
// holds also once the worker is forgotten).
func (rs *podRecords) stageReached(uid types.UID, stage podworker.Stage) func() bool {
	return func() bool {
		reached := false
		rs.view(uid, func(r *podRecord) { reached = r.maxStage >= stage })
		return reached
	}
}

// prune drops the records of the pods gone says are known nowhere any
// more, keeping each one's summary line (row) among the departed. gone is
// called without the lock held; row with it.
func (rs *podRecords) prune(gone func(uid types.UID) bool, row func(r *podRecord) summaryRow) {
	rs.mu.Lock()
	uids := make([]types.UID, 0, len(rs.pods))
	for uid := range rs.pods {
		uids = append(uids, uid)
	}
	rs.mu.Unlock()
	var drop []types.UID
	for _, uid := range uids {
		if gone(uid) {
			drop = append(drop, uid)
		}
	}
	if len(drop) == 0 {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, uid := range drop {
		r := rs.pods[uid]
		if r == nil {
			continue
		}
		rs.departed = append(rs.departed, departedPod{firstSeen: r.firstSeen, row: row(r)})
		delete(rs.pods, uid)
	}
	if n := len(rs.departed) - maxDeparted; n > 0 {
		rs.departedDropped += n
		rs.departed = append([]departedPod(nil), rs.departed[n:]...)
	}
	// A map does not give back the memory of deleted entries: rebuild it
	// once it holds much less than it did.
	if len(rs.pods) < rs.podsPeak/4 {
		pods := make(map[types.UID]*podRecord, len(rs.pods))
		for uid, r := range rs.pods {
			pods[uid] = r
		}
		rs.pods, rs.podsPeak = pods, len(pods)
	}
	rs.notifyLocked()
}

// rows returns the summary rows (row of each record, and the departed
// lines) in the order pods were first seen, and how many departed lines
// were dropped.
func (rs *podRecords) rows(row func(r *podRecord) summaryRow) ([]summaryRow, int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	lines := append([]departedPod(nil), rs.departed...)
	for _, r := range rs.sortedLocked() {
		lines = append(lines, departedPod{firstSeen: r.firstSeen, row: row(r)})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].firstSeen.Before(lines[j].firstSeen) })
	out := make([]summaryRow, len(lines))
	for i, l := range lines {
		out[i] = l.row
	}
	return out, rs.departedDropped
}

// sortedLocked returns the records in the order the pods were first seen.
func (rs *podRecords) sortedLocked() []*podRecord {
	recs := make([]*podRecord, 0, len(rs.pods))
	for _, r := range rs.pods {
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].firstSeen.Equal(recs[j].firstSeen) {
			return recs[i].firstSeen.Before(recs[j].firstSeen)
		}
		return recs[i].uid < recs[j].uid
	})
	return recs
}

// notify wakes waitUntil, for a change outside the records (the fake API
// server's).
func (rs *podRecords) notify() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.notifyLocked()
}

func (rs *podRecords) notifyLocked() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// waitUntil blocks until cond holds or ctx ends (returning ctx's cause).
// cond is checked after every change of the records, and every 200ms for
// what no record change signals (the sources becoming ready).
func (rs *podRecords) waitUntil(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		rs.mu.Lock()
		ch := rs.changed
		rs.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
