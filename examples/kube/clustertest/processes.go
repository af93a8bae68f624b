package clustertest

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// graceTimeout is how long pod processes get between SIGTERM and SIGKILL
// when the cluster closes.
const graceTimeout = time.Second

// StopPodProcesses stops every process of the pods the process runtime
// knows in each state directory: SIGTERM to their process groups, one
// second of grace, then SIGKILL until none is left; then it removes the
// pods' cgroups (processruntime.RemoveCgroups) and unmounts their memory
// volumes (processruntime.ReleaseVolumes). The agents using the
// directories must be stopped first (a running agent would start them
// again). Close does it for the cluster's nodes; call it for an agent the
// harness does not run (a podkit-agent process given NodeConfig), since
// the pods' processes outlive their agent by design. It reads the
// pods from the runtime (Open, RuntimePods, Close) and signals the
// processes itself: in this process, the closed runtimes of stopped agents
// still reap their children and record their exits, so a new runtime
// removing the pods' directories would race with them.
func StopPodProcesses(stateDirs ...string) error {
	uids := map[string]bool{}
	var errs []error
	for _, dir := range stateDirs {
		rt, err := processruntime.Open(processruntime.Options{StateDir: dir})
		if err != nil {
			errs = append(errs, fmt.Errorf("clustertest: listing the pods of %s: %w", dir, err))
			continue
		}
		for _, p := range rt.RuntimePods() {
			uids[string(p.UID)] = true
		}
		rt.Close()
	}
	if len(uids) > 0 {
		match := func(uid string) bool { return uids[uid] }
		if err := signalAll(match, syscall.SIGTERM, graceTimeout, false); err != nil {
			errs = append(errs, killStragglers(match))
		}
	}
	// The pods' cgroups outlived their runtimes with the processes in them;
	// with the processes gone, nothing of the pods is left on the machine.
	for _, dir := range stateDirs {
		if err := processruntime.RemoveCgroups(dir); err != nil {
			errs = append(errs, fmt.Errorf("clustertest: %w", err))
		}
		// The memory volumes of the pods (secrets, tokens) go too.
		if err := processruntime.ReleaseVolumes(dir); err != nil {
			errs = append(errs, fmt.Errorf("clustertest: %w", err))
		}
	}
	return errors.Join(errs...)
}

// signalAll sends sig to every process match selects (and to its process
// group), and waits up to timeout for them to be gone: nil if they are.
// With again, each process still there at a look is signalled again
// (SIGKILL: a child forked meanwhile is not missed).
func signalAll(match func(string) bool, sig syscall.Signal, timeout time.Duration, again bool) error {
	ownGroup := syscall.Getpgrp()
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.Now().Add(timeout)
	for first := true; ; first = false {
		procs, err := processruntime.ScanProcesses(match)
		if err != nil {
			return err
		}
		if len(procs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still run (first: PID %d)", len(procs), procs[0].PID)
		}
		if first || again {
			for _, p := range procs {
				if p.PGID > 1 && p.PGID != ownGroup {
					_ = syscall.Kill(-p.PGID, sig)
				}
				_ = syscall.Kill(p.PID, sig)
			}
		}
		<-ticker.C // look again until they are gone
	}
}

// killTimeout bounds the wait for killed processes to vanish.
const killTimeout = 10 * time.Second

// killStragglers kills (SIGKILL, to the process and its group) every
// process match selects by its pod UID, until none is left.
func killStragglers(match func(string) bool) error {
	if err := signalAll(match, syscall.SIGKILL, killTimeout, true); err != nil {
		return fmt.Errorf("clustertest: pod processes survived SIGKILL for %v: %w", killTimeout, err)
	}
	return nil
}
