package podworker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Transition is one change of a pod worker's Stage.
type Transition struct {
	UID      types.UID
	FullName string
	From, To Stage
	// Time is the engine clock's time of the change.
	Time time.Time
}

// Subscription is a registration made by Subscribe.
type Subscription struct {
	ch      chan<- Transition
	dropped atomic.Uint64
	obs     *observers
}

// Dropped returns how many transitions could not be delivered because the
// channel was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription: no transition is sent after Close returns.
// The channel is not closed (it is the caller's). Close is idempotent.
func (s *Subscription) Close() { s.obs.remove(s) }

// observers fans transitions out to subscriptions and waiters. Its methods
// are called with the engine's lock held (moved) or take their own lock.
type observers struct {
	// n counts subscriptions and waiters, so that moved costs nothing
	// when nobody listens. It changes under mu.
	n       atomic.Int32
	mu      sync.Mutex
	subs    []*Subscription
	waiters map[types.UID][]chan struct{}
	closed  bool
}

// listening reports whether any subscription or waiter exists.
func (o *observers) listening() bool { return o.n.Load() != 0 }

// moved tells subscriptions and uid's waiters of t; it never blocks. The
// driver calls it with the engine's lock held, so transitions go out in
// the order they happened.
func (o *observers) moved(t Transition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.subs) > 0 {
		for _, s := range o.subs {
			select {
			case s.ch <- t:
			default:
				s.dropped.Add(1)
			}
		}
	}
	for _, ch := range o.waiters[t.UID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// wake tells uid's waiters that its snapshot changed; it never blocks.
func (o *observers) wake(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ch := range o.waiters[uid] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (o *observers) add(s *Subscription) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.subs = append(o.subs, s)
		o.n.Add(1)
	}
}

func (o *observers) remove(s *Subscription) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, x := range o.subs {
		if x == s {
			o.subs = append(o.subs[:i:i], o.subs[i+1:]...)
			o.n.Add(-1)
			return
		}
	}
}

func (o *observers) addWaiter(uid types.UID, ch chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.waiters == nil {
		o.waiters = map[types.UID][]chan struct{}{}
	}
	o.waiters[uid] = append(o.waiters[uid], ch)
	o.n.Add(1)
}

func (o *observers) removeWaiter(uid types.UID, ch chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	list := o.waiters[uid]
	for i, x := range list {
		if x == ch {
			list = append(list[:i:i], list[i+1:]...)
			o.n.Add(-1)
			break
		}
	}
	if len(list) == 0 {
		delete(o.waiters, uid)
	} else {
		o.waiters[uid] = list
	}
}

func (o *observers) closeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.n.Add(-int32(len(o.subs)))
	o.subs = nil
}

// Subscribe sends every later stage change of every worker to ch, in the
// order they happen. Sends never block the engine: when ch is full the
// transition is dropped and counted (Subscription.Dropped), so give ch a
// buffer that fits the expected burst. Subscriptions end when Run returns,
// or with Close. The channel is never closed by the engine.
func (w *PodWorkers[T]) Subscribe(ch chan<- Transition) *Subscription {
	s := &Subscription{ch: ch, obs: &w.obs}
	w.obs.add(s)
	return s
}

// WaitForStage blocks until the worker of uid has reached stage (or gone
// past it: stages only move forward), and returns its snapshot then. With
// StageAbsent it waits until the engine has no worker for uid. It is
// WaitFor with that condition, so it does not poll, and may be called from
// any goroutine.
//
// A worker that is forgotten never reaches a later stage: a pod known only
// from the runtime is forgotten as soon as its containers are stopped, and
// SyncKnownPods forgets finished workers. Wait for StageAbsent in those
// cases. The error wraps ctx.Err() (or ErrStopped) and says which stage the
// worker was last seen in.
func (w *PodWorkers[T]) WaitForStage(ctx context.Context, uid types.UID, stage Stage) (PodInfo, error) {
	info, ok, err := w.WaitFor(ctx, uid, func(info PodInfo, ok bool) bool {
		if stage == StageAbsent {
			return !ok
		}
		return ok && info.Stage >= stage
	})
	if err != nil {
		last := StageAbsent
		if ok {
			last = info.Stage
		}
		return info, fmt.Errorf("podworker: pod %s did not reach stage %s (last seen %s): %w", uid, stage, last, err)
	}
	return info, nil
}

// WaitFor blocks until cond holds for the worker of uid, and returns the
// snapshot it held for; ok is false when the engine had no worker for uid.
// cond is called from WaitFor's goroutine, at once, after each stage
// change of uid and after each return of one of its hooks (so a cond on
// LastSyncTime or LastSyncError works), without the engine's lock. Stages
// can pass quickly, so
// write cond as a threshold (for example info.Stage >= StageTerminated)
// rather than an equality. WaitFor returns ctx.Err() when ctx ends and
// ErrStopped when the engine stops first.
func (w *PodWorkers[T]) WaitFor(ctx context.Context, uid types.UID, cond func(info PodInfo, ok bool) bool) (info PodInfo, ok bool, err error) {
	wake := make(chan struct{}, 1)
	w.obs.addWaiter(uid, wake)
	defer w.obs.removeWaiter(uid, wake)
	for {
		info, ok = w.Pod(uid)
		if cond(info, ok) {
			return info, ok, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return info, ok, ctx.Err()
		case <-w.done:
			info, ok = w.Pod(uid)
			if cond(info, ok) {
				return info, ok, nil
			}
			return info, ok, ErrStopped
		}
	}
}
