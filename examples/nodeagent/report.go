package main

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// say prints a line about the agent itself.
func (a *agent) say(format string, args ...any) {
	a.line("", fmt.Sprintf(format, args...))
}

// line prints one line about pod (empty: the agent), stamped now.
func (a *agent) line(pod, msg string) { a.lineAt(time.Now(), pod, msg) }

// onTransition records a pod worker's stage change and prints it: one line
// per transition, "from → to" and why.
func (a *agent) onTransition(tr podworker.Transition) {
	info, ok := a.workers.Pod(tr.UID)
	a.mu.Lock()
	if tr.To == podworker.StageAbsent && a.pods[tr.UID] == nil {
		// Forgotten, and its record already pruned.
		a.mu.Unlock()
		return
	}
	rec := a.recordLocked(tr.UID)
	if (tr.To == podworker.StageNotStarted || tr.To == podworker.StageSyncing) && rec.maxStage >= podworker.StageTerminationRequested {
		rec.newLifeLocked(tr.To)
	}
	if ok {
		rec.setPodLocked(info.Pod)
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
	reason := a.reasonLocked(rec, tr, info, ok)
	if tr.To == podworker.StageTerminationRequested || (tr.To == podworker.StageTerminating && tr.From < podworker.StageTerminationRequested) {
		rec.termReason = reason
	}
	name := rec.name
	a.notifyLocked()
	a.mu.Unlock()
	a.lineAt(tr.Time, name, fmt.Sprintf("%-36s %s", tr.From.String()+" → "+tr.To.String(), reason))
}

// reasonLocked says why a transition happened, from what the agent knows.
func (a *agent) reasonLocked(rec *podRecord, tr podworker.Transition, info podworker.PodInfo, ok bool) string {
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
		case a.shuttingDown:
			return "node shutdown, " + grace
		case info.Evicted:
			return "evicted, " + grace
		case !a.inStore(tr.UID):
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
func (a *agent) printEvent(ev processruntime.Event) {
	at := ev.Status.Time
	name := ev.Namespace + "/" + ev.Name
	c, _ := ev.Status.Container(ev.Container)
	switch ev.Type {
	case processruntime.ContainerStarted:
		msg := fmt.Sprintf("· container %s started, pid %d", ev.Container, c.PID)
		if c.RestartCount > 0 {
			msg += fmt.Sprintf(" (restart %d)", c.RestartCount)
		}
		a.lineAt(at, name, msg)
	case processruntime.ContainerExited:
		if c.Exit == nil {
			return
		}
		msg := fmt.Sprintf("· container %s exited with code %d (%s)", ev.Container, c.Exit.Code, c.Exit.Reason)
		if c.Exit.Reason == processruntime.ReasonStartError {
			msg += ": " + c.Exit.Message
		}
		a.lineAt(at, name, msg)
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
// seen: the pods the agent knows, and the latest that departed.
func (a *agent) summary() []summaryRow {
	a.mu.Lock()
	defer a.mu.Unlock()
	lines := append([]departedPod(nil), a.departed...)
	for _, rec := range a.sortedRecordsLocked() {
		lines = append(lines, departedPod{firstSeen: rec.firstSeen, row: a.summaryRowLocked(rec)})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].firstSeen.Before(lines[j].firstSeen) })
	rows := make([]summaryRow, len(lines))
	for i, l := range lines {
		rows[i] = l.row
	}
	return rows
}

// summaryRowLocked is rec's row of the summary table.
func (a *agent) summaryRowLocked(rec *podRecord) summaryRow {
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
		if _, ok := a.api.MirrorPod(rec.fullName); ok {
			row.Note = "static, has a mirror pod; " + row.Note
		} else {
			row.Note = "static; " + row.Note
		}
	}
	return row
}

// printSummary prints the summary table.
func (a *agent) printSummary() {
	rows := a.summary()
	a.mu.Lock()
	dropped := a.departedDropped
	a.mu.Unlock()
	a.outMu.Lock()
	defer a.outMu.Unlock()
	fmt.Fprintf(a.out, "\nsummary after %.1fs:\n", time.Since(a.start).Seconds())
	if dropped > 0 {
		fmt.Fprintf(a.out, "(%d earlier pods that left the node are not shown)\n", dropped)
	}
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tPHASE\tRESTARTS\tEXIT CODES\tTERMINATION\tNOTE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.Pod, r.Phase, r.Restarts, r.ExitCodes, r.Termination, r.Note)
	}
	tw.Flush()
}

// inStore reports whether config still wants the pod.
func (a *agent) inStore(uid types.UID) bool {
	_, ok := a.store.GetPodByUID(uid)
	return ok
}
