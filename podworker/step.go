package podworker

// The driver's half of every machine call: one step, and the application
// of the effects it returns. Every call of the machine that has effects —
// UpdatePod, Resync, SyncKnownPods, the timer loop, a worker taking or
// returning a hook, Run's shutdown — goes through stepLocked, so that the
// effects are applied the same way and in the same order everywhere.

// stepLocked makes one call of the machine and applies the effects it
// returns. The caller holds the lock and gets it back held.
//
// Under the lock, it readies a zero effects (stage changes are recorded
// only when someone counts or watches them; a waiter that registered
// before the call is seen), makes the call, and applies the effects that
// belong under the lock: stage changes counted and published in the order
// they happened, a worker started for ready work (poppers is how many live
// workers will look for work anyway), the timer loop woken. The effects
// that must not run under the lock — CompletedChs closed, hook contexts
// cancelled, slow hooks reported — are applied with the lock released for
// them, and only when there are some, so that a step without them costs no
// extra lock round trip. released reports whether the lock was let go
// (state may have changed meanwhile).
//
// fx is the caller's zero effects, and call makes the machine call with it:
// the caller declares it, so that it lives on the caller's stack (a
// pointer handed to a function value would otherwise move it to the heap,
// an allocation per call).
func (w *PodWorkers[T]) stepLocked(fx *effects, poppers int, call func()) (released bool) {
	fx.quiet = !w.timed && !w.obs.listening()
	call()
	w.commitLocked(fx, poppers)
	if !fx.outside() {
		return false
	}
	w.mu.Unlock()
	w.finish(fx)
	w.mu.Lock()
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
	w.mu.Lock()
	name := w.m.fullNameOf(c.rec)
	w.mu.Unlock()
	w.log.Error(errCompletedChReused, "A KillPodOptions.CompletedCh was already closed when the engine closed it: the same channel was handed to more than one kill, or closed by its owner", "podUID", c.rec.uid, "pod", name)
}
