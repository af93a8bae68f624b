package podworker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/podkit/podkit/mirror"
)

// The driver's side of a machine call: worker goroutines that run the hooks
// the machine hands out, and the application of each call's effects.

// spawnLocked keeps one goroutine on its way to the ready queues whenever
// they hold work: poppers is how many live workers will pop next anyway.
// A worker that takes work while more is ready calls it again, so the
// number of workers grows one at a time while hooks block, and stays small
// while hooks are quick (the lock is not fought over by thousands of
// goroutines).
func (w *PodWorkers[T]) spawnLocked(poppers int) {
	if w.state != running || w.starting+poppers > 0 || !w.m.hasReady() {
		return
	}
	if w.max > 0 && w.workers >= w.max {
		return
	}
	w.workers++
	w.starting++
	w.wg.Add(1)
	go w.runWorker()
}

// prepareLocked readies a zero effects for a machine call: stage changes
// are recorded only when someone counts or watches them. It is called with
// the lock held, so a waiter that registered before the call is seen.
func (w *PodWorkers[T]) prepareLocked(fx *effects) {
	fx.quiet = !w.timed && !w.obs.listening()
}

// commitLocked applies the effects that belong under the lock: stage
// changes are counted and published in the order they happened, a worker
// is started for ready work, and the timer loop is woken.
func (w *PodWorkers[T]) commitLocked(fx *effects, poppers int) {
	if n := fx.moves.len(); n > 0 {
		listening := w.obs.listening()
		for i := range n {
			mv := fx.moves.at(i)
			w.metrics.moved(mv.from, mv.to)
			if listening {
				w.obs.moved(Transition{UID: mv.uid, FullName: w.m.fullNameOf(mv.rec), From: mv.from, To: mv.to, Time: w.m.nowTime()})
			}
		}
	}
	if fx.returned != "" && w.obs.listening() {
		w.obs.wake(fx.returned)
	}
	if fx.ready {
		w.spawnLocked(poppers)
	}
	if fx.wake {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// finish applies the effects that are safe without the lock: CompletedChs
// are closed, hook contexts cancelled, and slow hooks reported.
func (w *PodWorkers[T]) finish(fx *effects) {
	for i := range fx.closes.len() {
		c := fx.closes.at(i)
		if !closeOnce(c.ch) {
			w.reportReusedChan(c)
		}
	}
	for i := range fx.cancels.len() {
		fx.cancels.at(i).cancel()
	}
	if len(fx.slow) > 0 {
		w.reportSlow(fx.slow)
	}
}

// outside reports whether fx has effects finish applies.
func (fx *effects) outside() bool {
	return fx.closes.len() > 0 || fx.cancels.len() > 0 || len(fx.slow) > 0
}

// closeOnce closes ch and reports false when it was closed already.
func closeOnce(ch chan<- struct{}) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	close(ch)
	return true
}

// reportReusedChan logs a CompletedCh the engine found already closed: the
// caller handed it to two kills, or closed it.
func (w *PodWorkers[T]) reportReusedChan(c closeReq) {
	w.mu.Lock()
	name := w.m.fullNameOf(c.rec)
	w.mu.Unlock()
	w.log.Error(errCompletedChReused, "A KillPodOptions.CompletedCh was already closed when the engine closed it: the same channel was handed to more than one kill, or closed by its owner", "podUID", c.rec.uid, "pod", name)
}

// runWorker is a worker goroutine: it runs ready hooks until none is left.
func (w *PodWorkers[T]) runWorker() {
	defer w.wg.Done()
	w.mu.Lock()
	w.starting--
	for w.state == running {
		var fx effects
		w.prepareLocked(&fx)
		c, ok := w.m.next(&fx)
		if ok {
			if c.ctx.values == nil {
				c.ctx.values = w.hookValues(c.rec)
			}
			// This worker is busy now: make sure someone takes the rest.
			fx.ready = true
		}
		w.commitLocked(&fx, 0)
		if !ok {
			if fx.outside() {
				w.mu.Unlock()
				w.finish(&fx)
				w.mu.Lock()
				continue
			}
			break
		}
		w.mu.Unlock()
		w.finish(&fx)

		terminal, err := w.call(&c)

		fx = effects{}
		w.mu.Lock()
		w.prepareLocked(&fx)
		w.m.complete(&c, terminal, err, &fx)
		w.commitLocked(&fx, 1)
		if fx.outside() {
			w.mu.Unlock()
			w.finish(&fx)
			w.mu.Lock()
		}
	}
	w.workers--
	w.mu.Unlock()
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
