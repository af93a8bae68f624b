package podworker

// The driver's half of every machine call: the effects a call returns are
// applied by applyLocked, the same way and in the same order for every
// call that has effects — UpdatePod, Resync, SyncKnownPods, the timer loop,
// a worker taking a hook (next) or returning one (complete), and Run's
// shutdown. Each site reads, with the lock held:
//
//	var fx effects
//	w.prepareLocked(&fx)
//	w.m.<call>(..., &fx)
//	w.applyLocked(&fx, poppers)
//
// (The machine call is written out at each site rather than passed in as a
// function: a closure that captures the call's results costs a worker a
// tenth of its dispatch time, measured with BenchmarkDispatchLatency.)

// prepareLocked readies a zero effects for a machine call: stage changes
// are recorded only when someone counts or watches them. It is called with
// the lock held, so a waiter that registered before the call is seen.
func (w *PodWorkers[T]) prepareLocked(fx *effects) {
	fx.quiet = !w.timed && !w.obs.listening()
}

// applyLocked applies the effects of one machine call. The caller holds the
// lock and gets it back held.
//
// Under the lock, it applies the effects that belong there: stage changes
// counted and published in the order they happened, a worker started for
// ready work (poppers is how many live workers will look for work anyway),
// the timer loop woken. The effects that must not run under the lock —
// CompletedChs closed, hook contexts cancelled, slow hooks reported — are
// applied with the lock released for them, and only when there are some,
// so that a call without them costs no extra lock round trip. released
// reports whether the lock was let go (the state may have changed
// meanwhile).
func (w *PodWorkers[T]) applyLocked(fx *effects, poppers int) (released bool) {
	w.commitLocked(fx, poppers)
	if !fx.outside() {
		return false
	}
	w.release()
	w.finish(fx)
	w.mu.Lock() // not lock: handed updates wait for the caller's own unlock
	return true
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

// outside reports whether fx has effects finish applies.
func (fx *effects) outside() bool {
	return fx.closes.len() > 0 || fx.cancels.len() > 0 || len(fx.slow) > 0
}

// finish applies the effects that are safe without the lock: CompletedChs
// are closed, hook contexts cancelled, and slow hooks reported. It is
// called without the lock.
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
// caller handed it to two kills, or closed it. Called without the lock.
func (w *PodWorkers[T]) reportReusedChan(c closeReq) {
	w.lock()
	name := w.m.fullNameOf(c.rec)
	w.unlock()
	w.log.Error(errCompletedChReused, "A KillPodOptions.CompletedCh was already closed when the engine closed it: the same channel was handed to more than one kill, or closed by its owner", "podUID", c.rec.uid, "pod", name)
}
