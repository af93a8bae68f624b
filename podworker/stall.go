package podworker

import "time"

// Blocked hooks. Workers run hooks on at most one goroutine per CPU
// (cpuWorkers) while the hooks are quick: more goroutines than CPUs would
// only take turns on them and fight over the engine's lock, which is what
// lengthens the tail of a burst. But a hook may block — on a container
// runtime, an API server, a gate in a test — and pods must not wait behind
// it for long (the kubelet gives every pod a goroutine of its own). So while
// ready work waits on that bound, Run's timer loop checks the workers
// stallPeriod of the engine's clock after the bound first held work back: a
// worker whose hook it took before then is stuck, and no longer counts
// against the bound, so a worker is started in its place. A pod behind
// hooks that all block waits for two periods at most; with hooks that keep
// blocking, the workers grow by cpuWorkers each period, to one per hook in
// flight as in the kubelet. A stuck worker counts again once its hook
// returns; the workers beyond the bound then park or exit as the work runs
// out. A worker whose hook returned and that waits for the lock to report
// it is not in its hook (worker.inHook), so a contended lock does not make
// workers look stuck.

// stallPeriod is the interval of the stall check while ready work waits on
// the bound. A hook found running for at least this long is treated as
// blocked rather than computing. Each check wakes Run's goroutine and takes
// the lock while the engine is at its busiest: checking every millisecond
// cost the engine benchmark harness's S2 (100,000 pods killed at once) a fifth of its
// kill phase, every 5 ms it was within the runs' noise.
const stallPeriod = 5 * time.Millisecond

// armStallCheckLocked makes sure a stall check is due, because ready work
// waits on the cpuWorkers bound. Called by spawnLocked. The hooks taken so
// far will have run for a whole period when the check comes: the epoch
// moves on, and the hooks taken from now on note the new one.
func (w *PodWorkers[T]) armStallCheckLocked() {
	if !w.stallAt.IsZero() {
		return
	}
	w.epoch++
	w.stallAt = w.clock.Now().Add(stallPeriod)
	// The timer loop sleeps until its own next due time: tell it.
	w.kickLocked()
}

// checkStalledLocked is the timer loop's stall check, when it is due at
// now: it marks stuck the workers whose hook they took before the check
// was armed, and lets a worker start for ready work in the place of each.
// While ready work still waits on the bound it arms the next check. It
// returns when the next check is due (zero: none armed).
func (w *PodWorkers[T]) checkStalledLocked(now time.Time) time.Time {
	if w.stallAt.IsZero() || now.Before(w.stallAt) {
		return w.stallAt
	}
	w.stallAt = time.Time{}
	found := false
	for _, p := range w.live {
		if !p.stuck && p.epoch < w.epoch && p.inHook.Load() {
			p.stuck = true
			w.stuck++
			found = true
		}
	}
	if found {
		w.spawnLocked(0) // arms the next check if the bound still holds work back
	} else if w.state == running && w.m.readyLen() > 0 && w.workers-w.stuck >= w.cpuWorkers {
		w.epoch++ // as armStallCheckLocked, without kicking this very loop
		w.stallAt = now.Add(stallPeriod)
	}
	return w.stallAt
}

// idleLocked records that p's hook has returned (p.inHook was cleared as
// it did): a stuck worker counts against the bound again.
func (w *PodWorkers[T]) idleLocked(p *worker) {
	if p.stuck {
		p.stuck = false
		w.stuck--
	}
}

// leaveLocked removes the exiting worker p from the live workers.
func (w *PodWorkers[T]) leaveLocked(p *worker) {
	last := len(w.live) - 1
	moved := w.live[last]
	w.live[p.at] = moved
	moved.at = p.at
	w.live[last] = nil
	w.live = w.live[:last]
}
