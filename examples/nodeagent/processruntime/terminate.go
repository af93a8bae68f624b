package processruntime

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/podworker"
)

// SyncTerminatingPod stops every process of the pod: SIGTERM to each
// container's process group, up to gracePeriod seconds for them to exit,
// then SIGKILL to what remains (sidecars after the other containers, one
// after another in reverse order: see sidecars.go; a container with a
// preStop hook runs it first, within its grace period, with the per-pod
// features); then it waits for the log shims to have
// written everything and ended (a shim still running KillTimeout later,
// held open by a process outside the pod, is killed). When ctx ends first (the engine cancels it
// when the grace period shortens, or at shutdown) it sends SIGKILL at once.
// It returns nil only when no process of the pod runs; an error (it is
// retried) when processes survive SIGKILL for Options.KillTimeout. Once it
// is called no container of the pod starts again. podStatusFn, when not
// nil, is applied to the pod's final status (APIStatus). status is not
// used.
func (r *Runtime) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, _ PodStatus, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	if r.closed() {
		return ErrClosed
	}
	r.mu.Lock()
	p := r.pods[pod.UID]
	if p == nil {
		r.mu.Unlock()
		return nil
	}
	p.terminating = true
	p.earlier = false
	if podStatusFn != nil {
		p.finalize = podStatusFn
	}
	procs := p.procsLocked()
	killing := r.killingEventsLocked(p)
	r.mu.Unlock()
	r.emit(killing...)
	r.reportProbes(p, pod)

	if err := r.stopInOrder(ctx, p, procs, time.Duration(max(gracePeriod, 1))*time.Second); err != nil {
		return fmt.Errorf("processruntime: stopping pod %s: %w", podName(pod), err)
	}
	if err := r.stopSandbox(p); err != nil {
		return fmt.Errorf("processruntime: stopping pod %s: %w", podName(pod), err)
	}
	if err := r.sweepPod(ctx, pod.UID, false); err != nil {
		return fmt.Errorf("processruntime: stopping pod %s: %w", podName(pod), err)
	}
	// Nothing of the pod holds its containers' output now: their log shims
	// read to the end and end.
	if err := r.stopLogShims(p.dir); err != nil {
		return fmt.Errorf("processruntime: stopping pod %s: %w", podName(pod), err)
	}
	r.mu.Lock()
	p.stopped = true
	ev := r.eventLocked(PodStopped, p, "")
	r.mu.Unlock()
	r.emit(ev)
	return nil
}

// procsLocked returns the running processes of the pod.
func (p *podState) procsLocked() []*proc {
	var out []*proc
	for _, c := range p.containers {
		if c.proc != nil {
			out = append(out, c.proc)
		}
	}
	return out
}

// stop terminates procs: SIGTERM, grace, SIGKILL (at once when ctx ends),
// then waits for what they left behind to disappear.
func (r *Runtime) stop(ctx context.Context, procs []*proc, grace time.Duration) error {
	if len(procs) == 0 {
		return nil
	}
	ctxDone := ctx.Done()
	escalated := false
	var deadline clock.Timer
	defer func() { deadline.Stop() }()
	escalate := func() {
		escalated = true
		ctxDone = nil
		for _, pr := range procs {
			r.signal(pr, syscall.SIGKILL)
		}
		if deadline != nil {
			deadline.Stop()
		}
		deadline = r.clock.NewTimer(r.killTimeout)
	}
	if ctx.Err() != nil {
		escalate()
	} else {
		for _, pr := range procs {
			r.signal(pr, syscall.SIGTERM)
		}
		deadline = r.clock.NewTimer(grace)
	}
	for _, pr := range procs {
		for waiting := true; waiting; {
			select {
			case <-pr.done:
				waiting = false
			case <-ctxDone:
				escalate()
			case <-deadline.C():
				if escalated {
					return fmt.Errorf("process %d still runs %v after SIGKILL", pr.pid, r.killTimeout)
				}
				escalate()
			case <-r.closing:
				return ErrClosed
			}
		}
	}
	// Every main process has ended and its group was killed then; wait for
	// the processes it left behind to be gone from the process table (a
	// sandbox's init does that for its pod's).
	var ticker clock.Ticker
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	if !escalated {
		deadline.Stop()
		deadline = r.clock.NewTimer(r.killTimeout)
	}
	for {
		var left []int
		for _, pr := range procs {
			if pr.sb != nil && !pr.sb.ended() {
				// Its sandbox's init, which reported its exit, killed what
				// was left of its group first. A scan of the host's whole
				// process table, for each process, would find nothing more
				// (it does when the sandbox ended instead: with hostPID,
				// the pod's processes outlive the init).
				continue
			}
			members, err := groupMembers(pr.pgid, pr.startTicks)
			if err != nil {
				return err
			}
			if len(members) > 0 {
				left = append(left, members...)
				_ = signalGroup(pr.pgid, syscall.SIGKILL)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if ticker == nil {
			ticker = r.clock.NewTicker(r.poll)
		}
		select {
		case <-ticker.C():
		case <-deadline.C():
			return fmt.Errorf("processes %v left behind by the pod still run %v after SIGKILL", left, r.killTimeout)
		case <-r.closing:
			return ErrClosed
		}
	}
}

// SyncTerminatingRuntimePod stops a pod known only from the state
// directory (an orphan of a previous run, or a pod config no longer
// knows), with a grace period of 1 second, then removes its directory. It
// also kills any process still carrying the pod's UID in its environment
// (for pods whose records were lost). It returns nil only when none of the
// pod's processes runs.
func (r *Runtime) SyncTerminatingRuntimePod(ctx context.Context, rp podworker.RuntimePod) error {
	if r.closed() {
		return ErrClosed
	}
	if err := validUID(rp.UID); err != nil {
		return fmt.Errorf("processruntime: %w", err)
	}
	name := rp.Namespace + "/" + rp.Name
	r.mu.Lock()
	p := r.pods[rp.UID]
	var procs []*proc
	var killing []Event
	if p != nil {
		p.terminating = true
		procs = p.procsLocked()
		killing = r.killingEventsLocked(p)
	}
	r.mu.Unlock()
	r.emit(killing...)
	if err := r.stop(ctx, procs, time.Second); err != nil {
		return fmt.Errorf("processruntime: stopping runtime pod %s (%s): %w", name, rp.UID, err)
	}
	if p != nil {
		if err := r.stopSandbox(p); err != nil {
			return fmt.Errorf("processruntime: stopping runtime pod %s (%s): %w", name, rp.UID, err)
		}
	}
	if err := r.sweepPod(ctx, rp.UID, true); err != nil {
		return fmt.Errorf("processruntime: stopping runtime pod %s (%s): %w", name, rp.UID, err)
	}
	if err := r.stopLogShims(r.PodDir(rp.UID)); err != nil {
		return fmt.Errorf("processruntime: stopping runtime pod %s (%s): %w", name, rp.UID, err)
	}
	var ev *Event
	if p != nil {
		r.mu.Lock()
		p.stopped = true
		e := r.eventLocked(PodStopped, p, "")
		ev = &e
		r.mu.Unlock()
	}
	if err := r.remove(rp.UID, name); err != nil {
		return err
	}
	if ev != nil {
		r.emit(*ev)
	}
	return nil
}

// remove forgets a pod with nothing running and deletes its directory.
func (r *Runtime) remove(uid types.UID, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[uid]
	if p != nil {
		if err := p.requireStoppedLocked(name); err != nil {
			return err
		}
	}
	// What may fail first: the pod is forgotten only once it is all gone,
	// so a retry finds it again.
	if err := r.removePodCgroup(uid); err != nil {
		return fmt.Errorf("processruntime: removing pod %s: %w", name, err)
	}
	if err := r.limits.remove(uid); err != nil {
		return fmt.Errorf("processruntime: removing pod %s: %w", name, err)
	}
	if p != nil {
		if err := r.releaseSandboxLocked(p); err != nil {
			return err
		}
	} else if r.network != nil {
		if err := r.detachNetwork(uid); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(r.PodDir(uid)); err != nil {
		return fmt.Errorf("processruntime: removing the directory of pod %s: %w", name, err)
	}
	delete(r.pods, uid)
	return nil
}
