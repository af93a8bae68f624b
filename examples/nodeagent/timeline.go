package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// timeline prints the agent's output: one line per pod worker transition
// (from → to, and why) and per container start or exit, and the summary
// table at the end. It keeps the pod records up to date with what it
// prints. As a lifecycle.Runnable it prints the workers' transitions until
// the agent stops (after the workers did, so none is missed).
type timeline struct {
	*console
	records *podRecords
	workers *podworker.PodWorkers[processruntime.PodStatus]
	// inStore reports whether config still wants a pod, shuttingDown
	// whether the node shuts down, hasMirror whether a static pod has a
	// mirror pod.
	inStore      func(types.UID) bool
	shuttingDown func() bool
	hasMirror    func(fullName string) bool

	transitions *transitionQueue
}

// newTimeline subscribes to the workers' transitions, so none is missed
// before Run starts reading them.
func newTimeline(c *console, records *podRecords, workers *podworker.PodWorkers[processruntime.PodStatus]) *timeline {
	t := &timeline{console: c, records: records, workers: workers}
	t.transitions = newTransitionQueue(workers, 4096, t.onTransition)
	return t
}

// Run prints transitions until ctx ends, then those still queued.
func (t *timeline) Run(ctx context.Context) error {
	t.transitions.drain(ctx)
	if dropped := t.transitions.sub.Dropped(); dropped > 0 {
		t.say("warning: %d transitions were not printed (the output fell behind)", dropped)
	}
	return nil
}

// transitionQueue hands the pod workers' transitions to a function, in
// order, on the goroutine of drain. Both runtimes' agents print theirs
// through one.
type transitionQueue struct {
	ch  chan podworker.Transition
	sub *podworker.Subscription
	on  func(podworker.Transition)
}

// newTransitionQueue subscribes to workers' transitions with a buffer of
// size, so none is missed before drain reads them.
func newTransitionQueue[T any](workers *podworker.PodWorkers[T], size int, on func(podworker.Transition)) *transitionQueue {
	q := &transitionQueue{ch: make(chan podworker.Transition, size), on: on}
	q.sub = workers.Subscribe(q.ch)
	return q
}

// drain hands over transitions until ctx ends, then those still queued,
// and ends the subscription.
func (q *transitionQueue) drain(ctx context.Context) {
	defer q.sub.Close()
	for {
		select {
		case tr := <-q.ch:
			q.on(tr)
		case <-ctx.Done():
			for {
				select {
				case tr := <-q.ch:
					q.on(tr)
				default:
					return
				}
			}
		}
	}
}

// say prints a line about the agent itself.
func (t *timeline) say(format string, args ...any) {
	t.line("", fmt.Sprintf(format, args...))
}

// line prints one line about pod (empty: the agent), stamped now.
func (t *timeline) line(pod, msg string) { t.lineAt(time.Now(), pod, msg) }

// onTransition records a pod worker's stage change and prints it: one line
// per transition, "from → to" and why.
func (t *timeline) onTransition(tr podworker.Transition) {
	info, ok := t.workers.Pod(tr.UID)
	if tr.To == podworker.StageAbsent && !t.records.has(tr.UID) {
		// Forgotten, and its record already pruned.
		return
	}
	var name, reason string
	t.records.edit(tr.UID, func(rec *podRecord) {
		name, reason = t.record(rec, tr, info, ok)
	})
	t.lineAt(tr.Time, name, fmt.Sprintf("%-36s %s", tr.From.String()+" → "+tr.To.String(), reason))
}

// record updates rec for tr and returns the pod's name and why tr
// happened.
func (t *timeline) record(rec *podRecord, tr podworker.Transition, info podworker.PodInfo, ok bool) (name, reason string) {
	if (tr.To == podworker.StageNotStarted || tr.To == podworker.StageSyncing) && rec.maxStage >= podworker.StageTerminationRequested {
		rec.newLife(tr.To)
	}
	if ok {
		rec.setPod(info.Pod)
	}
	if rec.name == "" {
		rec.name = tr.FullName
		if name, ns, err := mirror.ParsePodFullName(tr.FullName); err == nil {
			rec.name = ns + "/" + name
		}
	}
	rec.stage = tr.To
	rec.maxStage = max(rec.maxStage, tr.To)
	switch tr.To {
	case podworker.StageTerminationRequested, podworker.StageTerminating:
		if rec.termRequested.IsZero() {
			rec.termRequested = tr.Time
		}
	case podworker.StageTerminated:
		rec.terminated = tr.Time
	case podworker.StageFinished:
		rec.finished = tr.Time
	}
	reason = t.reason(rec, tr, info, ok)
	if tr.To == podworker.StageTerminationRequested || (tr.To == podworker.StageTerminating && tr.From < podworker.StageTerminationRequested) {
		rec.termReason = reason
	}
	return rec.name, reason
}

// reason says why a transition happened, from what the agent knows.
func (t *timeline) reason(rec *podRecord, tr podworker.Transition, info podworker.PodInfo, ok bool) string {
	grace := fmt.Sprintf("grace %ds", info.GracePeriod)
	switch tr.To {
	case podworker.StageNotStarted:
		if info.Static {
			return "admitted (static pod from a manifest)"
		}
		return "admitted"
	case podworker.StageSyncing:
		return "started"
	case podworker.StageTerminationRequested:
		switch {
		case ok && info.RuntimeOnly:
			return "left over from a previous run: killing it, " + grace
		case t.shuttingDown():
			return "node shutdown, " + grace
		case info.Evicted:
			return "evicted, " + grace
		case !t.inStore(tr.UID):
			return "removed from config, " + grace
		case info.Deleted:
			return "deleted, " + grace
		}
		return "killed, " + grace
	case podworker.StageTerminating:
		if tr.From == podworker.StageSyncing {
			phase := "done"
			if st, ok := rec.apiStatus(); ok {
				phase = string(st.Phase)
			}
			return "finished on its own (" + phase + ")"
		}
		return "stopping its containers, " + grace
	case podworker.StageTerminated:
		msg := "containers stopped"
		if st, ok := rec.apiStatus(); ok {
			msg += ": " + string(st.Phase)
			if codes := exitCodes(st); codes != "" {
				msg += ", exit codes " + codes
			}
		}
		if !rec.termRequested.IsZero() {
			msg += fmt.Sprintf(", in %.2fs", tr.Time.Sub(rec.termRequested).Seconds())
		}
		return msg
	case podworker.StageFinished:
		return "cleaned up"
	case podworker.StageAbsent:
		return "forgotten"
	}
	return ""
}

// printEvent prints a container start or exit.
func (t *timeline) printEvent(ev processruntime.Event) {
	at := ev.Status.Time
	name := ev.Namespace + "/" + ev.Name
	c, _ := ev.Status.Container(ev.Container)
	switch ev.Type {
	case processruntime.ContainerStarted:
		msg := fmt.Sprintf("· container %s started, pid %d", ev.Container, c.PID)
		if c.RestartCount > 0 {
			msg += fmt.Sprintf(" (restart %d)", c.RestartCount)
		}
		t.lineAt(at, name, msg)
	case processruntime.ContainerExited:
		if c.Exit == nil {
			return
		}
		msg := fmt.Sprintf("· container %s exited with code %d (%s)", ev.Container, c.Exit.Code, c.Exit.Reason)
		if c.Exit.Reason == processruntime.ReasonStartError {
			msg += ": " + c.Exit.Message
		}
		t.lineAt(at, name, msg)
	}
}

// exitCodes lists the last exit code of each container, init containers
// first: "fetch=0 compute=0".
func exitCodes(st v1.PodStatus) string {
	var parts []string
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, c := range list {
			switch {
			case c.State.Terminated != nil:
				parts = append(parts, fmt.Sprintf("%s=%d", c.Name, c.State.Terminated.ExitCode))
			case c.LastTerminationState.Terminated != nil:
				parts = append(parts, fmt.Sprintf("%s=%d", c.Name, c.LastTerminationState.Terminated.ExitCode))
			}
		}
	}
	return strings.Join(parts, " ")
}

func restarts(st v1.PodStatus) int32 {
	var n int32
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, c := range list {
			n += c.RestartCount
		}
	}
	return n
}

// summaryRow is one pod of the summary table.
type summaryRow struct {
	Pod, Phase  string
	Restarts    int32
	ExitCodes   string
	Termination string
	Note        string
}

// summary builds the summary table's rows, in the order pods were first
// seen: the pods the agent knows, and the latest that departed; and how
// many earlier departed pods are not shown.
func (t *timeline) summary() ([]summaryRow, int) {
	return t.records.rows(t.summaryRow)
}

// summaryRow is rec's row of the summary table. The records' lock is held.
func (t *timeline) summaryRow(rec *podRecord) summaryRow {
	row := summaryRow{Pod: rec.name, Phase: "-", ExitCodes: "-", Termination: "-"}
	if st, ok := rec.apiStatus(); ok {
		row.Phase = string(st.Phase)
		row.Restarts = restarts(st)
		if c := exitCodes(st); c != "" {
			row.ExitCodes = c
		}
	}
	if !rec.termRequested.IsZero() && !rec.terminated.IsZero() {
		row.Termination = fmt.Sprintf("%.2fs", rec.terminated.Sub(rec.termRequested).Seconds())
	}
	switch {
	case rec.rejected != nil:
		row.Note = "rejected: " + rec.rejected.Reason
	case rec.termReason != "":
		row.Note = rec.termReason
	}
	if rec.static {
		if t.hasMirror(rec.fullName) {
			row.Note = "static, has a mirror pod; " + row.Note
		} else {
			row.Note = "static; " + row.Note
		}
	}
	return row
}

// printSummary prints the summary table.
func (t *timeline) printSummary() {
	rows, dropped := t.summary()
	t.outMu.Lock()
	defer t.outMu.Unlock()
	fmt.Fprintf(t.out, "\nsummary after %.1fs:\n", time.Since(t.start).Seconds())
	if dropped > 0 {
		fmt.Fprintf(t.out, "(%d earlier pods that left the node are not shown)\n", dropped)
	}
	tw := tabwriter.NewWriter(t.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tPHASE\tRESTARTS\tEXIT CODES\tTERMINATION\tNOTE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.Pod, r.Phase, r.Restarts, r.ExitCodes, r.Termination, r.Note)
	}
	tw.Flush()
}
