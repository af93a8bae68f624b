package main

import (
	"sort"
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
// prunes its record (pruneRecords), and what is left of the pod in the
// agent is its departed line: the row it had in the summary, kept for the
// latest maxDeparted pods (older ones are only counted). The runtime's
// tombstone of a pod (its logs and final states) lives while config has
// the pod, and is pruned with it (pruneTombstones).

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

// recordLocked returns the record of uid, creating it.
func (a *agent) recordLocked(uid types.UID) *podRecord {
	rec := a.pods[uid]
	if rec == nil {
		rec = &podRecord{uid: uid, firstSeen: time.Now()}
		a.pods[uid] = rec
		a.podsPeak = max(a.podsPeak, len(a.pods))
	}
	return rec
}

// setPodLocked records the desired pod of rec.
func (rec *podRecord) setPodLocked(pod *v1.Pod) {
	if pod == nil {
		return
	}
	rec.pod = pod
	rec.name = pod.Namespace + "/" + pod.Name
	rec.fullName = mirror.PodFullName(pod)
	rec.static = mirror.IsStaticPod(pod)
}

// newLifeLocked forgets what rec knew of an earlier life of its UID (the
// UID was terminated, and now runs again): its termination times, its
// status and its rejection.
func (rec *podRecord) newLifeLocked(stage podworker.Stage) {
	rec.termRequested, rec.terminated, rec.finished = time.Time{}, time.Time{}, time.Time{}
	rec.termReason = ""
	rec.maxStage = stage
	rec.rejected = nil
	rec.runtime, rec.hasRuntime = processruntime.PodStatus{}, false
}

// pruneRecords drops the records of the pods that are known nowhere any
// more: not in config, not to the engine, and not to the runtime (neither
// running nor as a tombstone). It keeps each one's summary line among
// the departed. It runs from housekeeping, inside the sync loop's critical
// section (config cannot change meanwhile), once every config source has
// delivered its pods: before that, a pod missing from config may just not
// have arrived yet.
func (a *agent) pruneRecords() {
	if !a.handler.SourcesReady() {
		return
	}
	inRuntime := map[types.UID]bool{}
	for _, list := range [][]podworker.RuntimePod{a.rt.RuntimePods(), a.rt.Tombstones()} {
		for _, rp := range list {
			inRuntime[rp.UID] = true
		}
	}
	a.mu.Lock()
	uids := make([]types.UID, 0, len(a.pods))
	for uid := range a.pods {
		if !inRuntime[uid] {
			uids = append(uids, uid)
		}
	}
	a.mu.Unlock()
	var gone []types.UID
	for _, uid := range uids {
		if _, inEngine := a.workers.Pod(uid); !inEngine && !a.inStore(uid) {
			gone = append(gone, uid)
		}
	}
	if len(gone) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, uid := range gone {
		rec := a.pods[uid]
		if rec == nil {
			continue
		}
		a.departed = append(a.departed, departedPod{firstSeen: rec.firstSeen, row: a.summaryRowLocked(rec)})
		delete(a.pods, uid)
	}
	if n := len(a.departed) - maxDeparted; n > 0 {
		a.departedDropped += n
		a.departed = append([]departedPod(nil), a.departed[n:]...)
	}
	// A map does not give back the memory of deleted entries: rebuild it
	// once it holds much less than it did.
	if len(a.pods) < a.podsPeak/4 {
		pods := make(map[types.UID]*podRecord, len(a.pods))
		for uid, rec := range a.pods {
			pods[uid] = rec
		}
		a.pods, a.podsPeak = pods, len(pods)
	}
	a.notifyLocked()
}

// sortedRecordsLocked returns the records in the order the pods were
// first seen.
func (a *agent) sortedRecordsLocked() []*podRecord {
	recs := make([]*podRecord, 0, len(a.pods))
	for _, rec := range a.pods {
		recs = append(recs, rec)
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].firstSeen.Equal(recs[j].firstSeen) {
			return recs[i].firstSeen.Before(recs[j].firstSeen)
		}
		return recs[i].uid < recs[j].uid
	})
	return recs
}
