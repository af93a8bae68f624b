package clustertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// stopTimeout bounds the stop of one node's pods.
const stopTimeout = 30 * time.Second

// stopPodProcesses stops every pod the process runtime knows in each
// state directory: it opens the runtime there (the agents must be stopped:
// one runtime at a time may use a directory, and a running agent would
// start the pods again) and terminates each pod as an orphan is (SIGTERM,
// one second of grace, SIGKILL). Processes of those pods still found in the
// process table afterwards (a child that left its group and ignored
// SIGTERM) get SIGKILL. A directory the default agent never used holds
// nothing and costs nothing.
func stopPodProcesses(stateDirs []string) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		uids = map[string]bool{}
	)
	for _, dir := range stateDirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopped, err := stopRuntimePods(dir)
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			for _, uid := range stopped {
				uids[uid] = true
			}
		}()
	}
	wg.Wait()
	errs = append(errs, killStragglers(uids))
	return errors.Join(errs...)
}

// stopRuntimePods terminates the pods of the process runtime in dir and
// returns their UIDs.
func stopRuntimePods(dir string) ([]string, error) {
	rt, err := processruntime.Open(processruntime.Options{StateDir: dir})
	if err != nil {
		return nil, fmt.Errorf("clustertest: opening the runtime of %s to stop its pods: %w", dir, err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	pods := rt.RuntimePods()
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = rt.SyncTerminatingRuntimePod(ctx, podworker.RuntimePod{UID: p.UID, Namespace: p.Namespace, Name: p.Name})
		}()
	}
	wg.Wait()
	uids := make([]string, len(pods))
	for i, p := range pods {
		uids[i] = string(p.UID)
	}
	return uids, errors.Join(errs...)
}

// killTimeout bounds the wait for killed processes to vanish.
const killTimeout = 10 * time.Second

// killStragglers kills (SIGKILL, to the process and its group) every
// process that carries one of uids as its pod UID, until none is left.
func killStragglers(uids map[string]bool) error {
	if len(uids) == 0 {
		return nil
	}
	match := func(uid string) bool { return uids[uid] }
	ownGroup := syscall.Getpgrp()
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.Now().Add(killTimeout)
	for {
		procs, err := processruntime.ScanProcesses(match)
		if err != nil {
			return fmt.Errorf("clustertest: finding pod processes: %w", err)
		}
		if len(procs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clustertest: %d pod processes survived SIGKILL for %v (first: PID %d)", len(procs), killTimeout, procs[0].PID)
		}
		for _, p := range procs {
			if p.PGID > 1 && p.PGID != ownGroup {
				_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
			}
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		<-ticker.C // look again until they are gone
	}
}
