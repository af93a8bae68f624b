package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
	"github.com/podkit/podkit/podworker"
)

// run runs the agent until the demo ends, the node is idle (--until-idle)
// or ctx ends (a signal), then shuts down cleanly: every pod is terminated
// with its grace period, the lifecycle stops (the workers drain, then the
// timeline and the endpoint), and the summary is printed. It returns an
// error when the agent failed, when the shutdown left pods running, or
// when processes of its pods survived.
func (a *agent) run(ctx context.Context) error {
	defer a.rt.Close()
	mainCtx, cancelMain := context.WithCancelCause(ctx)
	defer cancelMain(nil)
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	runDone := make(chan error, 1)
	go func() {
		err := a.lc.Run(runCtx)
		runDone <- err
		cancelMain(fmt.Errorf("the agent stopped: %v", err))
	}()
	if a.server != nil {
		a.say("serving /pods, /pods/{uid}, /pods/{uid}/logs/{container} and /healthz on http://%s", a.server.listener.Addr())
	}

	a.say("containment: %s", a.rt.Containment())
	var errs []error
	var mainErr error
	switch {
	case a.opts.demo():
		a.say("playing the demo (node %s, state in %s)", a.opts.nodeName, a.opts.stateDir)
		d := &demo{api: a.api, records: a.records, rt: a.rt, workers: a.workers, say: a.say, nodeName: a.opts.nodeName, timeout: a.opts.demoTimeout}
		mainErr = d.play(mainCtx)
	case a.opts.untilIdle:
		a.say("running the pods of %s until they have all finished", a.manifestDir)
		mainErr = a.records.waitUntil(mainCtx, a.idle)
	default:
		a.say("running the pods of %s until SIGINT or SIGTERM", a.manifestDir)
		<-mainCtx.Done()
	}
	if cause := context.Cause(mainCtx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		errs = append(errs, cause)
	} else if ctx.Err() != nil {
		a.say("interrupted")
	} else if mainErr != nil {
		errs = append(errs, mainErr)
	}

	// Clean shutdown.
	a.say("shutting down the node: every pod is terminated with its grace period (budget %v)", a.opts.shutdownGrace)
	errs = append(errs, shutdownNode(a.lc.NodeShutdown(), a.lc.SyncLoop(), a.opts.shutdownGrace)...)
	if err := a.waitCleanedUp(5 * time.Second); err != nil {
		errs = append(errs, err)
	}
	// Pods cleaned up after that pass leave their logs behind only while
	// config still has them.
	a.pruneTombstones()
	stopRun()
	if err := <-runDone; err != nil {
		errs = append(errs, err)
	}
	if err := a.checkNoProcessLeft(); err != nil {
		errs = append(errs, err)
	}
	a.timeline.printSummary()
	return errors.Join(errs...)
}

// shutdownNode terminates every pod within budget (critical pods last),
// then runs one last housekeeping pass, which kills what no worker knows
// (leftovers of a previous run the sync loop has not reached yet). It
// returns every problem it met; both runtimes' agents end with it.
func shutdownNode(m *nodeshutdown.Manager, loop *lifecycle.SyncLoop, budget time.Duration) []error {
	var errs []error
	report, err := m.Shutdown(context.Background(), nodeshutdown.Budget{GracePeriod: budget})
	if err != nil {
		errs = append(errs, fmt.Errorf("node shutdown: %w", err))
	}
	for _, p := range report.NotTerminated {
		errs = append(errs, fmt.Errorf("pod %s was not terminated", p.FullName))
	}
	if err := loop.Housekeeping(context.Background()); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// listRuntimePods is housekeeping's RuntimePodLister. Housekeeping calls it
// once per pass, after SyncKnownPods and inside the sync loop's critical
// section (so config cannot change meanwhile), which makes it the agent's
// per-housekeeping hook: it first removes the tombstones (logs and final
// container states) of pods config no longer has and the records of pods
// known nowhere any more, then lists the runtime's pods.
func (a *agent) listRuntimePods(context.Context) ([]podworker.RuntimePod, error) {
	a.pruneTombstones()
	a.pruneRecords()
	return a.rt.RuntimePods(), nil
}

// pruneTombstones removes the tombstones of the pods that are no longer in
// the store, once every config source has delivered its pods: before
// that, a pod missing from the store may just not have arrived yet, and
// dropping its tombstone would let a pod that already finished run again.
func (a *agent) pruneTombstones() {
	if !a.lc.SyncLoop().SourcesReady() {
		return
	}
	if _, err := a.rt.PruneTombstones(a.inStore); err != nil {
		a.log.Error(err, "Removing the logs of pods config no longer has failed; the next housekeeping retries")
	}
}

// pruneRecords drops the records of the pods that are known nowhere any
// more: not in config, not to the engine, and not to the runtime (neither
// running nor as a tombstone), once every config source has delivered its
// pods: before that, a pod missing from config may just not have arrived
// yet.
func (a *agent) pruneRecords() {
	if !a.lc.SyncLoop().SourcesReady() {
		return
	}
	inRuntime := map[types.UID]bool{}
	for _, list := range [][]podworker.RuntimePod{a.rt.RuntimePods(), a.rt.Tombstones()} {
		for _, rp := range list {
			inRuntime[rp.UID] = true
		}
	}
	a.records.prune(func(uid types.UID) bool {
		if inRuntime[uid] {
			return false
		}
		_, inEngine := a.workers.Pod(uid)
		return !inEngine && !a.inStore(uid)
	}, a.timeline.summaryRow)
}

// waitCleanedUp waits, up to limit, for every pod worker to have finished
// its cleanup and for the runtime to hold no pod any more but tombstones
// (so every pod's scratch directory is removed before the agent exits; the
// logs and final states of pods config still has are kept, for the next
// run to know which pods already finished).
func (a *agent) waitCleanedUp(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	err := a.records.waitUntil(ctx, func() bool {
		for _, info := range a.workers.Pods() {
			if !info.Finished && !(info.RuntimeOnly && info.Stage >= podworker.StageTerminated) {
				return false
			}
		}
		return len(a.rt.RuntimePods()) == 0
	})
	if err != nil {
		return fmt.Errorf("pods were not all cleaned up within %v: %d workers, runtime pods %v", limit, len(a.workers.Pods()), a.rt.RuntimePods())
	}
	return nil
}

// checkNoProcessLeft looks in the process table for processes of the
// agent's pods, the last line of defence: the runtime stops every process
// of a pod it stops, so any found is a bug (or a pod the shutdown could
// not stop). It kills them and returns an error naming them.
func (a *agent) checkNoProcessLeft() error {
	left, err := a.rt.Processes()
	if err != nil {
		return fmt.Errorf("checking for processes left behind: %w", err)
	}
	if len(left) > 0 {
		killed := processruntime.KillProcesses(left)
		return fmt.Errorf("%d processes of the agent's pods still ran after the shutdown, first pid %d (pod %s, container %s); killed %d of them", len(left), left[0].PID, left[0].PodUID, left[0].Container, killed)
	}
	return nil
}

// idle reports whether the sources have spoken, every pod has finished (or
// was rejected), and the runtime holds no pod config does not want (a
// leftover of a previous run that housekeeping has yet to kill).
func (a *agent) idle() bool {
	if !a.lc.SyncLoop().SourcesReady() {
		return false
	}
	for _, rp := range a.rt.RuntimePods() {
		if !a.inStore(rp.UID) {
			return false
		}
	}
	for _, info := range a.workers.Pods() {
		if info.Stage < podworker.StageTerminated {
			return false
		}
	}
	for _, p := range a.store.GetPods() {
		rejected := false
		a.records.view(p.UID, func(r *podRecord) { rejected = r.rejected != nil })
		if info, ok := a.workers.Pod(p.UID); !rejected && (!ok || info.Stage < podworker.StageTerminated) {
			return false
		}
	}
	return true
}
