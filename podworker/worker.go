package podworker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/podkit/podkit/mirror"
)

// The worker goroutines that run the hooks the machine hands out.

// spawnLocked makes sure ready work has workers on their way to it.
// poppers is how many live workers will pop next anyway (the caller
// itself, when it goes on to look for work); the workers woken and not
// yet holding the lock, and those whose hook returned, pop next too. For
// each ready record beyond those, a parked worker is woken while any is
// parked: a burst of updates finds a worker per CPU at once, not one
// after the other, and an update that comes while every worker but a
// parked one is in a hook does not wait for a hook to return.
//
// A new goroutine is started only when no worker at all is on its way (a
// started goroutine waits for a CPU like any other, so it does not count
// against waking a parked worker, which may find one sooner). A worker
// that takes work while more is ready calls spawnLocked again, so the
// number of workers grows one at a time while hooks block (a worker
// blocked in a hook neither returns nor pops). It grows to one per CPU
// (cpuWorkers) at once; past that, only for the hooks a stall check found
// blocked (stall.go): quick hooks run on as many goroutines as there are
// CPUs, which do not fight over the lock, and a pod waits behind hooks
// that block for no more than two stall periods.
func (w *PodWorkers[T]) spawnLocked(poppers int) {
	if w.state != running {
		return
	}
	ready := w.m.readyLen()
	coming := w.woken + poppers + int(w.returning.Load())
	for coming < ready && w.unparkLocked() {
		coming++ // a warm worker takes it (parked workers count in workers)
	}
	if coming+w.spawning > 0 || ready == 0 {
		return
	}
	if w.max > 0 && w.workers >= w.max {
		return
	}
	if w.workers-w.stuck >= w.cpuWorkers {
		w.armStallCheckLocked()
		return
	}
	w.workers++
	w.spawning++
	w.wg.Add(1)
	w.spawnLater = true // started once the lock is released (unlock)
}

// runWorker is a worker goroutine: it runs ready hooks until none is left,
// then parks for more (parking.go) or exits. Each hook is two steps of the
// machine: next hands out the call, complete takes its outcome. The lock is
// held from one to the next, so a worker that moves straight on to more
// work takes the lock once per hook.
func (w *PodWorkers[T]) runWorker() {
	defer w.wg.Done()
	self := &worker{}
	w.lock()
	w.spawning--
	self.at = len(w.live)
	w.live = append(w.live, self)
	for w.state == running {
		if w.pause != nil && !w.pauseLocked() {
			break
		}
		var fx effects
		w.prepareLocked(&fx)
		c, ok := w.m.next(&fx)
		if ok {
			if c.ctx.values == nil {
				c.ctx.values = w.hookValues(c.rec)
			}
			// This worker is busy now: make sure someone takes the rest.
			fx.ready = true
			self.epoch = w.epoch
			self.inHook.Store(true)
		}
		released := w.applyLocked(&fx, 0)
		if !ok {
			if released {
				continue // work may have come while the lock was let go
			}
			if w.parkLocked(self) {
				continue // woken for work
			}
			break
		}
		w.unlock()
		terminal, err := w.call(&c)
		self.inHook.Store(false)
		// Returning: this worker pops next once it has the lock, so work
		// made ready meanwhile needs no other worker (spawnLocked).
		w.returning.Add(1)
		w.lock()
		w.returning.Add(-1)
		w.idleLocked(self)
		fx = effects{}
		w.prepareLocked(&fx)
		w.m.complete(&c, terminal, err, &fx)
		w.applyLocked(&fx, 1)
	}
	w.workers--
	w.leaveLocked(self)
	w.unlock()
}

// pauseLocked lets a test hold a worker before it takes work (pause, which
// is nil outside the package's tests), without the lock. It reports
// whether the worker may go on.
func (w *PodWorkers[T]) pauseLocked() bool {
	w.unlock()
	w.pause()
	w.lock()
	return w.state == running
}

// call makes one hook call, turning a panic into an error, and times and
// counts it.
func (w *PodWorkers[T]) call(c *hookCall) (terminal bool, err error) {
	m := w.metrics
	var start time.Time
	if w.timed {
		start = w.clock.Now()
		if !c.startTime.IsZero() {
			m.dispatch.Observe(start.Sub(c.startTime).Seconds())
		}
	}
	defer func() {
		if p := recover(); p != nil {
			perr := &panicError{value: p, stack: debug.Stack()}
			m.panics.Inc()
			w.log.Error(perr, "Pod hook panicked; it will be retried", "podUID", c.rec.uid, "pod", c.fullName(), "hook", c.hook.String(), "stack", string(perr.stack))
			terminal, err = false, perr
		} else if err != nil && !errors.Is(err, context.Canceled) {
			w.log.Error(err, "Pod hook failed; it will be retried", "podUID", c.rec.uid, "pod", c.fullName(), "hook", c.hook.String())
		}
		if err != nil {
			m.retries[c.hook].Inc()
		}
		if w.timed {
			m.syncDuration[c.hook].Observe(w.clock.Since(start).Seconds())
		}
	}()
	if c.hook == HookSyncTerminatingRuntimePod {
		// One path for a syncer without RuntimePodSyncer and a hook that
		// says it is not implemented: an error, retried like any other.
		err = SyncTerminatingRuntimePod(c.ctx, w.syncer, c.runningPod)
		if errors.Is(err, ErrNotImplemented) {
			err = fmt.Errorf("podworker: pod %s (%s) is known only from the runtime, and the PodSyncer cannot stop it (RuntimePodSyncer): %w", c.fullName(), c.rec.uid, err)
		}
		return false, err
	}
	var status T
	if w.status != nil {
		if status, err = w.status.PodStatus(c.ctx, c.rec.uid, c.lastSync); err != nil {
			return false, fmt.Errorf("podworker: reading the status of pod %s (%s): %w", c.fullName(), c.rec.uid, err)
		}
	}
	switch c.hook {
	case HookSyncPod:
		return w.syncer.SyncPod(c.ctx, c.updateType, c.pod, c.mirror, status)
	case HookSyncTerminatingPod:
		if c.checkStopped && w.stopped != nil && w.stopped.NothingRunning(status) {
			return false, nil
		}
		return false, w.syncer.SyncTerminatingPod(c.ctx, c.pod, status, c.grace, c.statusFn)
	default:
		return false, w.syncer.SyncTerminatedPod(c.ctx, c.pod, status)
	}
}

// fullName names the call's pod from its arguments (which the engine never
// changes), so it needs no lock.
func (c *hookCall) fullName() string {
	if c.pod != nil {
		return mirror.PodFullName(c.pod)
	}
	return mirror.BuildPodFullName(c.runningPod.Name, c.runningPod.Namespace)
}
