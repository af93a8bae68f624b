package podworker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// runState is where a PodWorkers is in its own life.
type runState int

const (
	notRunning runState = iota
	running
	stopped
)

// PodWorkers runs a PodSyncer's hooks for every pod it is told about: one
// serialized worker per pod UID, with updates coalesced so only the newest
// desired state is synced, retries and resyncs of its own, and a window
// (IsPodKnownTerminated, CouldHaveRunningContainers, ...) that tells every
// other loop of the agent where each pod stands.
//
// Create it with New, start it with Run, feed it with UpdatePod (usually
// through lifecycle.SyncLoop) and SyncKnownPods. All methods are safe for
// concurrent use from any goroutine.
//
// PodWorkers is the driver of the engine's pure state machine (machine):
// it serializes calls to it under one lock, runs the hooks it hands out on
// worker goroutines, and applies the effects each call returns — stage
// changes published under the lock (so subscribers see them in order),
// CompletedChs closed, hook contexts cancelled and slow hooks reported
// after the lock is released.
type PodWorkers[T any] struct {
	syncer  PodSyncer[T]
	status  StatusSource[T]
	stopped StoppedChecker[T]
	clock   clock.WithTicker
	log     logr.Logger
	metrics *metrics
	max     int
	// timed is false when no metrics are collected: hooks are not timed.
	timed bool

	// mu guards everything below. It is never held while a hook, the
	// StatusSource or a waiter's condition runs.
	mu    sync.Mutex
	m     *machine
	state runState
	// workers counts live worker goroutines, parked ones included;
	// woken counts the parked workers woken for work and not yet holding
	// the lock, spawning the goroutines started and not yet holding it.
	workers, woken, spawning int
	// returning counts the workers whose hook returned and that wait for
	// the lock to report it; they pop next. It is raised without the lock.
	returning atomic.Int32
	// cpuWorkers bounds the parked workers and the workers running hooks
	// that are not stuck (cpuWorkerCount).
	cpuWorkers int
	// parked are the warm workers waiting for work (parking.go), the one
	// that parked last at the end.
	parked []*worker
	// live are the live workers, parked ones included, each at its index
	// (worker.at); stuck counts those whose hook a stall check found
	// running for a whole stall period (stall.go). epoch counts the stall
	// checks armed, and stallAt is when the timer loop makes the armed one:
	// zero while none is.
	live    []*worker
	stuck   int
	epoch   uint64
	stallAt time.Time
	// wakeLater and spawnLater are the wake-ups spawnLocked chose under
	// the lock — parked workers to wake (linked through next), or a
	// goroutine to start — done by unlock once the lock is released.
	wakeLater  *worker
	spawnLater bool
	// sweepAt is when the timer loop next ends the workers parked through
	// a whole sweep period; zero while no worker is parked.
	sweepAt time.Time
	// handed are the updates handed over by UpdatePod callers that found
	// the lock taken (handoff.go).
	handed handoff
	// values gives hook contexts the values of Run's context.
	values context.Context

	wg sync.WaitGroup
	// kick wakes Run's timer loop when the delay heap's head moved earlier.
	kick chan struct{}
	// done is closed when Run has returned.
	done chan struct{}
	obs  observers

	// pause, when set (by the package's tests, before Run), is called by a
	// worker before each time it takes work, without the lock: the test's
	// way to step the workers as the machine's scripts step the machine.
	pause func()
}

// New returns a PodWorkers that calls syncer's hooks. It starts nothing: call
// Run. Updates given before Run are kept and acted on once it runs. The
// returned error says which option is invalid; syncer must not be nil.
func New[T any](syncer PodSyncer[T], opts Options[T]) (*PodWorkers[T], error) {
	if syncer == nil {
		return nil, errors.New("podworker: New needs a PodSyncer, got nil")
	}
	if err := opts.complete(); err != nil {
		return nil, err
	}
	w := &PodWorkers[T]{
		syncer:  syncer,
		status:  opts.Status,
		clock:   opts.Clock,
		log:     opts.Logger,
		metrics: newMetrics(opts.Metrics),
		timed:   opts.Metrics != nil,
		max:     opts.MaxConcurrentSyncs,
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	w.cpuWorkers = cpuWorkerCount(opts.MaxConcurrentSyncs)
	if opts.Status != nil {
		w.stopped, _ = opts.Status.(StoppedChecker[T])
	}
	w.m = newMachine(machineConfig{
		clock:        opts.Clock,
		resync:       opts.ResyncInterval,
		backOff:      opts.BackOff,
		maxBackOff:   opts.MaxBackOff,
		slowWarning:  max(opts.SlowHookWarning, 0),
		stampUpdates: w.timed,
	})
	return w, nil
}

// hookValues gives a pod's hook context the values of Run's context, and
// the engine's logger with the pod's UID and full name. A worker calls it
// under the lock, for a context the machine has just made (see
// hookCall.ctx).
func (w *PodWorkers[T]) hookValues(r *record) context.Context {
	if w.log.GetSink() == nil {
		return w.values
	}
	return logr.NewContext(w.values, w.log.WithValues("podUID", r.uid, "pod", r.fullNameOf()))
}

// Run dispatches work until ctx ends, then shuts down: it cancels the
// context of every running hook, waits for every hook it started to return,
// and returns nil. Nothing the engine started is left running. After Run
// has returned, UpdatePod and KillPod return ErrStopped and Resync reports
// false; the window and the snapshots still answer, from the state at
// shutdown.
//
// Run may be called once. A second call while it runs is an error; a call
// after it returned returns ErrStopped.
func (w *PodWorkers[T]) Run(ctx context.Context) error {
	w.lock()
	switch w.state {
	case running:
		w.unlock()
		return errors.New("podworker: Run called while already running")
	case stopped:
		w.unlock()
		return ErrStopped
	}
	w.state = running
	w.values = context.WithoutCancel(ctx)
	w.spawnLocked(0)
	w.unlock()

	var timer clock.Timer
	for {
		var fx effects
		w.lock()
		w.prepareLocked(&fx)
		next, ok := w.m.fireDue(&fx)
		fx.wake = false // this loop is awake
		w.applyLocked(&fx, 0)
		if !w.sweepAt.IsZero() || !w.stallAt.IsZero() {
			now := w.clock.Now()
			next, ok = earliest(next, ok, w.sweepParkedLocked(now))
			next, ok = earliest(next, ok, w.checkStalledLocked(now))
		}
		w.unlock()

		var fire <-chan time.Time
		if ok {
			wait := next.Sub(w.clock.Now())
			if timer == nil {
				timer = w.clock.NewTimer(wait)
			} else {
				timer.Stop()
				timer.Reset(wait)
			}
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			w.shutdown()
			return nil
		case <-w.kick:
		case <-fire:
		}
	}
}

// earliest returns the earlier of the due time next (when ok) and at (when
// not zero), and whether there is one.
func earliest(next time.Time, ok bool, at time.Time) (time.Time, bool) {
	if at.IsZero() || (ok && !at.Before(next)) {
		return next, ok
	}
	return at, true
}

func (w *PodWorkers[T]) shutdown() {
	w.mu.Lock()
	w.closeHandoffLocked() // applies what was handed, as lock would
	w.state = stopped
	var fx effects
	w.prepareLocked(&fx)
	w.m.shutdown(&fx)
	w.applyLocked(&fx, 0)
	w.endParkedLocked()
	w.stallAt = time.Time{}
	w.unlock()
	w.drain()
	close(w.done)
	w.obs.closeAll()
}

// UpdatePod records a desired state for a pod and returns at once; the
// pod's worker acts on it when it can. Updates to one UID coalesce: a
// worker busy with a hook runs only the newest update when the hook
// returns. UpdatePod never blocks on hooks and may be called from any
// goroutine, including from inside a hook.
//
// A UID's termination is final. Once it was requested — by a kill, a
// deletion timestamp, a terminal phase, or SyncKnownPods orphaning it — a
// SyncPodCreate for the same UID does not start it again: it only marks the
// worker RestartRequested (as in the kubelet: the UID was deleted). That
// holds also when the kill came first, before the engine had ever seen the
// pod (a virtual-kubelet provider told of a deletion before the creation,
// say): the kill makes a worker, and the later create is a restart request.
// To start the UID over, let its termination finish, call SyncKnownPods
// (housekeeping does; it forgets the finished worker because of the
// restart request), then send SyncPodCreate again — lifecycle's
// housekeeping does both steps.
//
// It returns an error wrapping ErrInvalidUpdate for input it rejects (no pod
// and no RunningPod, a pod without UID, a RunningPod with a non-kill update,
// a mirror pod whose full name differs from the pod's, an unknown update
// type), ErrStopped once Run has returned, and ctx.Err() when ctx has
// already ended. With an error nothing is recorded
// and no CompletedCh is closed. ctx is not retained.
func (w *PodWorkers[T]) UpdatePod(ctx context.Context, opts UpdatePodOptions) error {
	return w.updatePod(ctx, opts, nil)
}

func (w *PodWorkers[T]) updatePod(ctx context.Context, opts UpdatePodOptions, own chan<- struct{}) error {
	if err := validate(&opts); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	u := update{updateType: opts.UpdateType, pod: opts.Pod, mirror: opts.MirrorPod, runningPod: opts.RunningPod}
	if !opts.StartTime.IsZero() {
		u.startTime = w.m.ticks(opts.StartTime)
	}
	k := killRequest{chans: [2]chan<- struct{}{nil, own}}
	if ko := opts.KillPodOptions; ko != nil {
		k.chans[0] = ko.CompletedCh
		k.evict = ko.Evict
		k.statusFn = ko.PodStatusFunc
		k.override = ko.PodTerminationGracePeriodSecondsOverride
	}
	if w.mu.TryLock() {
		w.takeHandedLocked() // the caller's own handed updates come first
	} else if handed, err := w.handOver(u, k); handed || err != nil {
		return err
	} else {
		w.lock() // too many handed: wait, as without the handoff
	}
	var fx effects
	if w.state == stopped {
		w.unlock()
		return ErrStopped
	}
	w.prepareLocked(&fx)
	w.m.update(u, k, &fx)
	w.applyLocked(&fx, 0)
	w.unlock()
	return nil
}

// Resync asks for the pod's current hook to run again soon — SyncPod while
// the pod syncs, SyncTerminatingPod or SyncTerminatedPod while it
// terminates — with the newest desired state the engine has, as a
// SyncPodSync. It is how a syncer reports a runtime event (a container
// exited, a probe changed, a sandbox died) without sending the whole pod
// again: the hook that reacts to it runs at once if the pod is idle or
// waiting for a resync or retry, or right after the hook that runs now
// returns. It coalesces with anything pending: many calls before the hook
// runs make one run, and a pending update runs instead (it is newer).
//
// Resync reports whether a hook will run for it: false, and nothing
// recorded, for a UID the engine has no worker for or whose worker is
// finished, and for every UID once Run has returned (nothing runs any
// more); true otherwise (also before Run starts, when the hook runs once it
// does, and for a static pod still waiting for its full name, which then
// starts when it may). It never blocks on hooks and may be called from any
// goroutine, including from inside a hook.
func (w *PodWorkers[T]) Resync(uid types.UID) bool {
	var ok bool
	var fx effects
	w.lock()
	if w.state != stopped {
		w.prepareLocked(&fx)
		ok = w.m.nudge(uid, &fx)
		w.applyLocked(&fx, 0)
	}
	w.unlock()
	return ok
}

// KillPod asks for pod to be terminated and blocks until it can no longer
// have running containers (its SyncTerminatingPod succeeded, or it never
// started), ctx ends, or the engine stops. opts works as with a SyncPodKill
// update; a CompletedCh in it is closed as usual. On ctx's end KillPod
// returns ctx.Err() and leaves the termination under way. It returns
// ErrStopped when Run has returned, and an error wrapping ErrInvalidUpdate
// for a nil pod or otherwise invalid input.
//
// A KillPod for a UID the engine has not seen yet makes a worker for it
// and terminates it (it never started, so no hook runs and KillPod returns
// at once). A SyncPodCreate that arrives for that UID afterwards is then a
// restart request, not a start (see UpdatePod); start the UID over with
// SyncKnownPods and a new SyncPodCreate, as the KillPod example shows.
func (w *PodWorkers[T]) KillPod(ctx context.Context, pod *v1.Pod, opts KillPodOptions) error {
	if pod == nil {
		return invalid("KillPod needs a pod, got nil")
	}
	own := make(chan struct{})
	if err := w.updatePod(ctx, UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &opts}, own); err != nil {
		return err
	}
	select {
	case <-own:
		return nil
	case <-ctx.Done():
		w.lock()
		w.m.detach(pod.UID, own)
		w.unlock()
		return ctx.Err()
	case <-w.done:
		return ErrStopped
	}
}

// SyncKnownPods tells the engine which pods are desired (all pods config
// knows, admitted or not) and reports every worker it keeps. Calling it
// marks the engine synced: from then on a UID it has no worker for is known
// not to run (see the window). For each worker:
//   - finished and no longer desired, or finished and asked to restart
//     (RestartRequested): forgotten, and left out of the result;
//   - not desired and never started: forgotten (its CompletedCh closed);
//   - not desired and running: terminated as deleted, with its computed
//     grace period (decision D9);
//   - anything else: kept and reported.
//
// Called by housekeeping, from any goroutine. The caller should then send a
// SyncPodCreate for each desired, admitted pod missing from the result.
// The result is the caller's.
func (w *PodWorkers[T]) SyncKnownPods(desired []*v1.Pod) map[types.UID]WorkerReport {
	set := make(map[types.UID]struct{}, len(desired))
	for _, p := range desired {
		if p != nil {
			set[p.UID] = struct{}{}
		}
	}
	var fx effects
	w.lock()
	w.prepareLocked(&fx)
	out := w.m.syncKnown(set, &fx)
	w.applyLocked(&fx, 0)
	w.unlock()
	return out
}

// Pod returns a snapshot of the worker for uid; ok is false when there is
// none.
func (w *PodWorkers[T]) Pod(uid types.UID) (info PodInfo, ok bool) {
	w.lock()
	defer w.unlock()
	return w.m.info(uid)
}

// Pods returns a snapshot of every worker, in no particular order. The
// slice is the caller's.
func (w *PodWorkers[T]) Pods() []PodInfo {
	w.lock()
	defer w.unlock()
	return w.m.infos()
}
