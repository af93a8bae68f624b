package podworker

import "time"

// A hook must return promptly once its context is cancelled: KillPod,
// shorter grace periods and Run's shutdown wait for it. One that does not
// is the agent's bug, and the engine says so rather than hang in silence
// (Options.SlowHookWarning).

// maxListedHooks bounds how many hooks one drain report names.
const maxListedHooks = 20

// reportSlow logs the hooks the machine found still running
// SlowHookWarning (or a multiple of it) after their context was cancelled,
// and counts each hook call once. Called without the engine's lock.
func (w *PodWorkers[T]) reportSlow(slow []slowHook) {
	for _, h := range slow {
		if h.first {
			w.metrics.slowHooks.Inc()
		}
		w.log.Info("A pod hook is still running after its context was cancelled; hooks must return promptly once ctx is done (KillPod, shorter grace periods and Run's shutdown wait for them)",
			"podUID", h.uid, "pod", h.fullName, "hook", h.hook.String(), "cancelledFor", h.cancelled)
	}
}

// drain waits for every worker goroutine to return. While it waits it
// logs, every SlowHookWarning, which hooks are still running.
func (w *PodWorkers[T]) drain() {
	every := w.m.cfg.slowWarning
	if every <= 0 {
		w.wg.Wait()
		return
	}
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	t := w.clock.NewTimer(every)
	defer t.Stop()
	var waited time.Duration
	for {
		select {
		case <-done:
			return
		case <-t.C():
			waited += every
			w.logWaiting(waited)
			t.Reset(every)
		}
	}
}

// logWaiting logs the hooks Run's shutdown still waits for.
func (w *PodWorkers[T]) logWaiting(waited time.Duration) {
	w.lock()
	hooks, n := w.m.runningHooks(maxListedHooks)
	w.unlock()
	w.log.Info("Run is shutting down and still waits for pod hooks to return after their contexts were cancelled",
		"waited", waited, "running", n, "hooks", hooks)
}
