package podworker

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Warm workers. A worker that finds no work parks rather than exits, while
// fewer than maxParked workers are parked; new work goes to the worker that
// parked last (its stack and caches are warm), and a new goroutine is made
// only when none is parked. Parked workers belong to the engine, not to a
// pod: an idle pod still holds no goroutine. A worker left parked through
// a whole sweep period of Run's timer loop (parkIdleTimeout, on the
// engine's clock) exits, so an engine with nothing to do holds only Run's
// goroutine again within 2*parkIdleTimeout. Run's shutdown ends every
// parked worker.

// parkIdleTimeout is the sweep period: a worker parked through one whole
// period exits at the end of it, between parkIdleTimeout and twice that
// after it parked.
const parkIdleTimeout = 500 * time.Millisecond

// cpuWorkerCount is how many workers may wait for work at once, and how
// many may run hooks that are not blocked (stall.go): one per CPU the Go
// scheduler runs on (runtime.GOMAXPROCS at New), so that a burst of quick
// hooks finds a worker for every CPU without a goroutine start, and no
// more goroutines than CPUs fight for the lock; never more than
// MaxConcurrentSyncs when that is set.
func cpuWorkerCount(maxConcurrent int) int {
	n := runtime.GOMAXPROCS(0)
	if maxConcurrent > 0 {
		n = min(n, maxConcurrent)
	}
	return n
}

// worker is one worker goroutine's state, shared with the engine under the
// lock: its place among the live workers and the hook it runs, for the
// stall check (stall.go), and, once it has parked, the channel it waits on
// while parked and why it was woken. A worker makes it when it starts and
// keeps it for its life.
type worker struct {
	// at is the worker's index in PodWorkers.live.
	at int
	// inHook is set, under the lock, when the worker takes a hook, and
	// cleared, without it, as soon as the hook returns: a worker waiting
	// for the lock to report its hook is not blocked in it. epoch is the
	// count of stall checks armed when it took the hook; stuck is set once
	// a stall check armed after that found the hook still running.
	inHook atomic.Bool
	stuck  bool
	epoch  uint64

	// wake gets one value per park: work for the worker, or its end. Its
	// buffer of one means the waker never blocks. Made on the first park.
	wake chan struct{}
	// exit, set with wake, says the worker must exit rather than work.
	exit bool
	// idle is set by a sweep that found the worker parked: the next sweep
	// that still finds it parked ends it.
	idle bool
	// next is the worker to wake after this one, in the chain of wake-ups
	// chosen under the lock (wakeLater). Written under the lock while the
	// worker is parked; read by the waker before it wakes this worker.
	next *worker
}

// parkLocked parks the calling worker, when there is room and Run runs, and
// waits without the lock until it is woken. It reports true when the
// worker was woken for work (it holds the lock again, and no longer counts
// as woken), false when it must exit: it was not parked, or a sweep or
// Run's shutdown ended it. p is the calling worker's own state.
func (w *PodWorkers[T]) parkLocked(p *worker) bool {
	if w.state != running || len(w.parked) >= w.cpuWorkers {
		return false
	}
	if p.wake == nil {
		p.wake = make(chan struct{}, 1)
	}
	p.exit, p.idle = false, false
	w.parked = append(w.parked, p)
	if w.sweepAt.IsZero() {
		// The timer loop sleeps until its own next due time: tell it about
		// the sweep.
		w.sweepAt = w.clock.Now().Add(parkIdleTimeout)
		w.kickLocked()
	}
	w.unlock()
	<-p.wake
	w.lock()
	if p.exit {
		return false
	}
	w.woken--
	return true
}

// unparkLocked hands ready work to the worker that parked last, and
// reports false when none is parked. The worker counts as woken until it
// has the lock. It is woken once the lock is released (unlock): a worker
// woken under the lock would, on another CPU, run straight into it.
func (w *PodWorkers[T]) unparkLocked() bool {
	n := len(w.parked)
	if n == 0 {
		return false
	}
	p := w.parked[n-1]
	w.parked[n-1] = nil
	w.parked = w.parked[:n-1]
	w.woken++
	p.next, w.wakeLater = w.wakeLater, p
	return true
}

// sweepParkedLocked is the timer loop's sweep, when it is due at now: it
// ends the workers parked since the previous sweep and marks the others,
// then arms the next sweep while any worker is parked. It returns when the
// next sweep is due (zero: none armed).
func (w *PodWorkers[T]) sweepParkedLocked(now time.Time) time.Time {
	if w.sweepAt.IsZero() || now.Before(w.sweepAt) {
		return w.sweepAt
	}
	kept := w.parked[:0]
	for _, p := range w.parked {
		if p.idle {
			p.exit = true
			p.wake <- struct{}{}
			continue
		}
		p.idle = true
		kept = append(kept, p)
	}
	clear(w.parked[len(kept):])
	w.parked = kept
	w.sweepAt = time.Time{}
	if len(kept) > 0 {
		w.sweepAt = now.Add(parkIdleTimeout)
	}
	return w.sweepAt
}

// endParkedLocked ends every parked worker: Run is shutting down.
func (w *PodWorkers[T]) endParkedLocked() {
	for _, p := range w.parked {
		p.exit = true
		p.wake <- struct{}{}
	}
	clear(w.parked)
	w.parked = w.parked[:0]
	w.sweepAt = time.Time{}
}

// release releases the lock, then wakes the parked workers or starts the
// goroutine spawnLocked chose while it was held. Waking or starting a
// goroutine may wake an idle thread of the Go scheduler (a system call),
// and the woken worker's first step is to take the lock: done under the
// lock, that would lengthen the caller's hold and make the worker wait
// for it. Every release of the lock after a machine call goes through
// release or unlock, so the goroutine that chose a wake-up is the one that
// does it.
//
// release is for a caller that takes the lock again at once (applyLocked);
// a caller done with the lock calls unlock.
func (w *PodWorkers[T]) release() {
	p, spawn := w.wakeUpsLocked()
	w.mu.Unlock()
	w.wakeUp(p, spawn)
}

// unlock is the release of a caller done with the lock. Right after
// letting go, it applies the updates handed over while the lock was held
// (handoff.go), when no one else has taken the lock to do so, and only
// then makes the wake-ups chosen under all those holds: an update handed
// over waits for no system call.
func (w *PodWorkers[T]) unlock() {
	p, spawn := w.wakeUpsLocked()
	w.mu.Unlock()
	for w.handed.top.Load() != nil && w.mu.TryLock() {
		w.takeHandedLocked()
		q, more := w.wakeUpsLocked()
		w.mu.Unlock()
		p = chainWakeUps(p, q)
		spawn += more
	}
	w.wakeUp(p, spawn)
}

// wakeUpsLocked takes the wake-ups spawnLocked chose: the chain of parked
// workers to wake, and how many goroutines to start (0 or 1).
func (w *PodWorkers[T]) wakeUpsLocked() (*worker, int) {
	p, spawn := w.wakeLater, 0
	if w.spawnLater {
		spawn = 1
	}
	w.wakeLater, w.spawnLater = nil, false
	return p, spawn
}

// chainWakeUps appends the chain q to the chain p. Both are the caller's
// (taken under the lock), and short: at most cpuWorkers are parked.
func chainWakeUps(p, q *worker) *worker {
	if p == nil {
		return q
	}
	last := p
	for last.next != nil {
		last = last.next
	}
	last.next = q
	return p
}

// wakeUp wakes the chain of parked workers p and starts spawn goroutines,
// without the lock. A worker's next link is read before it is woken: once
// woken, it may park again and be chained anew.
func (w *PodWorkers[T]) wakeUp(p *worker, spawn int) {
	for p != nil {
		next := p.next
		p.wake <- struct{}{}
		p = next
	}
	for range spawn {
		go w.runWorker()
	}
}

// kickLocked wakes Run's timer loop to look at its due times again.
func (w *PodWorkers[T]) kickLocked() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}
