package kube_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/kube/agent"
)

// podStamps are the times one pod reached each stage of its start: the
// benchmark's own (created, bound, running) and its agent's (agent.Config
// .Trace). A zero time is a stage not seen (the agent in a process of its
// own reports none).
type podStamps struct {
	createStart, createEnd time.Time // the client's Create call
	bound                  time.Time // a watch event first shows spec.nodeName
	running                time.Time // a watch event first shows phase Running

	delivered    time.Time // the agent's sync loop handed the pod to its worker
	syncStart    time.Time // the first SyncPod began
	syncEnd      time.Time // the first SyncPod returned
	runningRead  time.Time // the read of the pod that patch was computed from was sent
	runningSent  time.Time // the first status patch with phase Running was sent
	runningAcked time.Time // ... and the API server accepted it
	writes       int       // status patches sent for the pod before it was Running
	syncs        int       // SyncPods begun before the Running patch was sent
	secondSync   time.Time // the second SyncPod began
	secondUpdate string    // ... and its update type
	firstErr     string    // the first SyncPod's error, "" when it succeeded
}

// startupTrace gathers the stamps of the pods of one iteration, by UID.
// Its methods are safe for concurrent use: the agents call record from
// their goroutines.
type startupTrace struct {
	mu   sync.Mutex
	pods map[types.UID]*podStamps
}

func newStartupTrace() *startupTrace {
	return &startupTrace{pods: make(map[types.UID]*podStamps)}
}

// stamps returns uid's stamps; t.mu must be held.
func (t *startupTrace) stampsLocked(uid types.UID) *podStamps {
	s := t.pods[uid]
	if s == nil {
		s = &podStamps{}
		t.pods[uid] = s
	}
	return s
}

// update runs f on uid's stamps under the lock.
func (t *startupTrace) update(uid types.UID, f func(*podStamps)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t.stampsLocked(uid))
}

// record is the agents' agent.TraceFunc: it keeps the first time of each
// stage.
func (t *startupTrace) record(p agent.PodTrace) {
	first := func(at *time.Time) {
		if at.IsZero() {
			*at = p.At
		}
	}
	t.update(p.UID, func(s *podStamps) {
		switch p.Stage {
		case agent.TraceDelivered:
			first(&s.delivered)
		case agent.TraceSyncStarted:
			first(&s.syncStart)
			if s.runningSent.IsZero() {
				s.syncs++
			}
			if s.syncs == 2 && s.secondSync.IsZero() {
				s.secondSync, s.secondUpdate = p.At, p.Update.String()
			}
		case agent.TraceSyncEnded:
			if s.syncEnd.IsZero() && p.Err != nil {
				s.firstErr = p.Err.Error()
			}
			first(&s.syncEnd)
		case agent.TraceStatusRead:
			if p.Phase == v1.PodRunning {
				first(&s.runningRead)
			}
		case agent.TraceStatusSent:
			if s.runningSent.IsZero() {
				s.writes++
			}
			if p.Phase == v1.PodRunning {
				first(&s.runningSent)
			}
		case agent.TraceStatusWritten:
			if p.Phase == v1.PodRunning {
				first(&s.runningAcked)
			}
		}
	})
}

// take returns the stamps gathered and starts afresh.
func (t *startupTrace) take() map[types.UID]*podStamps {
	t.mu.Lock()
	defer t.mu.Unlock()
	pods := t.pods
	t.pods = make(map[types.UID]*podStamps)
	return pods
}

// stage is one interval of a pod's start, between two of its stamps.
type stage struct {
	name     string // the metric's prefix
	what     string // for the log
	from, to func(*podStamps) time.Time
}

// startupStages are the intervals reported, in the order a pod passes
// them; total and node are the goal's two figures.
var startupStages = []stage{
	{"total", "creation to Running seen by the watch", func(s *podStamps) time.Time { return s.createStart }, func(s *podStamps) time.Time { return s.running }},
	{"node", "bound to Running, both seen by the watch", func(s *podStamps) time.Time { return s.bound }, func(s *podStamps) time.Time { return s.running }},
	{"create", "the Create call", func(s *podStamps) time.Time { return s.createStart }, func(s *podStamps) time.Time { return s.createEnd }},
	{"bind", "Create returned to bound seen by the watch", func(s *podStamps) time.Time { return s.createEnd }, func(s *podStamps) time.Time { return s.bound }},
	{"deliver", "bound seen by the watch to handed to the agent's worker", func(s *podStamps) time.Time { return s.bound }, func(s *podStamps) time.Time { return s.delivered }},
	{"syncwait", "handed to the worker to its first SyncPod", func(s *podStamps) time.Time { return s.delivered }, func(s *podStamps) time.Time { return s.syncStart }},
	{"sync", "the first SyncPod", func(s *podStamps) time.Time { return s.syncStart }, func(s *podStamps) time.Time { return s.syncEnd }},
	{"resync", "first SyncPod returned to the second begun, for the pods synced again before Running", func(s *podStamps) time.Time { return s.syncEnd }, func(s *podStamps) time.Time { return s.secondSync }},
	{"writeq", "first SyncPod returned to the Running status patch sent", func(s *podStamps) time.Time { return s.syncEnd }, func(s *podStamps) time.Time { return s.runningSent }},
	{"readq", "first SyncPod returned to the read for the Running patch sent", func(s *podStamps) time.Time { return s.syncEnd }, func(s *podStamps) time.Time { return s.runningRead }},
	{"read", "the read for the Running patch sent to the patch sent", func(s *podStamps) time.Time { return s.runningRead }, func(s *podStamps) time.Time { return s.runningSent }},
	{"write", "the Running status patch, sent to accepted", func(s *podStamps) time.Time { return s.runningSent }, func(s *podStamps) time.Time { return s.runningAcked }},
	{"watch", "the Running patch accepted to Running seen by the watch", func(s *podStamps) time.Time { return s.runningAcked }, func(s *podStamps) time.Time { return s.running }},
}

// quantiles returns the p50 and p99 of d (sorted in place), in seconds;
// none for an empty d.
func quantiles(d []time.Duration) (p50, p99 float64, ok bool) {
	if len(d) == 0 {
		return 0, 0, false
	}
	slices.Sort(d)
	q := func(p float64) float64 { return d[min(len(d)-1, int(p*float64(len(d))))].Seconds() }
	return q(0.50), q(0.99), true
}

// stageDurations returns, per stage, the durations of the pods that have
// both of its stamps.
func stageDurations(pods []*podStamps) map[string][]time.Duration {
	out := make(map[string][]time.Duration, len(startupStages))
	for _, st := range startupStages {
		for _, s := range pods {
			from, to := st.from(s), st.to(s)
			if from.IsZero() || to.IsZero() {
				continue
			}
			out[st.name] = append(out[st.name], to.Sub(from))
		}
	}
	return out
}

// describeStages is a table of each stage's p50 and p99 over pods, for
// the benchmark's log, with the status patches sent per pod until it was
// Running.
func describeStages(pods []*podStamps) string {
	var b strings.Builder
	durs := stageDurations(pods)
	for _, st := range startupStages {
		if p50, p99, ok := quantiles(durs[st.name]); ok {
			fmt.Fprintf(&b, "\n  %-8s p50 %6.3fs p99 %6.3fs  (%d pods) %s", st.name, p50, p99, len(durs[st.name]), st.what)
		}
	}
	if perPod, traced := patchesPerPod(pods); traced > 0 {
		fmt.Fprintf(&b, "\n  status patches per pod until Running: %.2f (%d pods)", perPod, traced)
	}
	b.WriteString(describeFirstSyncs(pods))
	return b.String()
}

// reportStages reports each stage's p50 and p99 over the pods of every
// iteration, and, for the total and the node's part, the spread of the
// iterations' p99s (min and max).
func reportStages(b *testing.B, iterations [][]*podStamps) {
	var all []*podStamps
	for _, it := range iterations {
		all = append(all, it...)
	}
	durs := stageDurations(all)
	for _, st := range startupStages {
		if p50, p99, ok := quantiles(durs[st.name]); ok {
			b.ReportMetric(p50, st.name+"-p50-s")
			b.ReportMetric(p99, st.name+"-p99-s")
		}
	}
	for _, name := range []string{"total", "node"} {
		lo, hi := 0.0, 0.0
		for i, it := range iterations {
			_, p99, ok := quantiles(stageDurations(it)[name])
			if !ok {
				continue
			}
			if i == 0 || p99 < lo {
				lo = p99
			}
			hi = max(hi, p99)
		}
		b.ReportMetric(lo, name+"-p99-min-s")
		b.ReportMetric(hi, name+"-p99-max-s")
	}
	if perPod, traced := patchesPerPod(all); traced > 0 {
		b.ReportMetric(perPod, "patches/pod")
	}
}

// patchesPerPod is the mean of the status patches the traced pods got
// until Running, and how many pods were traced.
func patchesPerPod(pods []*podStamps) (float64, int) {
	writes, traced := 0, 0
	for _, s := range pods {
		if !s.runningSent.IsZero() {
			writes += s.writes
			traced++
		}
	}
	if traced == 0 {
		return 0, 0
	}
	return float64(writes) / float64(traced), traced
}

// describeFirstSyncs says how many pods needed more than one SyncPod to
// be Running, and the errors their first SyncPods returned, the most
// frequent first (at most five, each cut to its last 240 bytes: the
// cause is at the end of a wrapped error).
func describeFirstSyncs(pods []*podStamps) string {
	again, failed := 0, 0
	errs, why := map[string]int{}, map[string]int{}
	for _, s := range pods {
		if s.syncs > 1 {
			again++
			why[s.secondUpdate]++
		}
		if s.firstErr != "" {
			failed++
			msg := s.firstErr
			if len(msg) > 240 {
				msg = "..." + msg[len(msg)-240:]
			}
			errs[msg]++
		}
	}
	if again == 0 && failed == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n  synced more than once before Running: %d pods (the second SyncPod's update type: %v); first SyncPod failed: %d pods", again, why, failed)
	msgs := make([]string, 0, len(errs))
	for m := range errs {
		msgs = append(msgs, m)
	}
	slices.SortFunc(msgs, func(a, c string) int {
		if errs[a] != errs[c] {
			return errs[c] - errs[a]
		}
		return strings.Compare(a, c)
	})
	for _, m := range msgs[:min(5, len(msgs))] {
		fmt.Fprintf(&b, "\n    %d× %s", errs[m], m)
	}
	return b.String()
}
