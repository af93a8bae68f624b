package podworker

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Updates handed to the lock's holder. An UpdatePod that finds the engine's
// lock taken does not wait for it: it pushes its update onto a lock-free
// stack and returns, and whoever holds the lock applies the handed updates
// before it lets go (or before it reads anything, so a caller that handed
// an update sees it in its next call, as if it had waited). A burst of
// updates from several goroutines then keeps every CPU busy rather than
// putting callers to sleep on the lock one after the other, with CPUs idle
// while each is woken.
//
// The rules that make it safe:
//   - Every acquisition of the lock applies the handed updates first
//     (lock), and every final release looks for updates handed since and
//     applies them if it can take the lock again (unlock). A caller that
//     handed an update then tries the lock itself. So a handed update is
//     never left behind: either its caller takes the lock, or the holder
//     that kept it from doing so sees the update once it has let go.
//   - Handed updates are applied in the order they were handed, all of one
//     batch before any effect of theirs lets the lock go, so one caller's
//     updates to a pod are applied in its order.
//   - About maxHanded wait at most (callers racing past the check add one
//     each); beyond that a caller waits for the lock as before, which
//     bounds the memory and the time one holder spends applying them.
//   - Run's shutdown closes the stack first (closeHandoffLocked) and waits for
//     the callers pushing onto it, then applies what they pushed: an
//     update handed before Run returned is applied before it does, and one
//     handed later is refused with ErrStopped, as any UpdatePod then is.

// maxHanded is where callers stop handing updates over and wait for the
// lock instead.
const maxHanded = 256

// handedUpdate is one update waiting for the lock's holder, linked to the
// one handed before it.
type handedUpdate struct {
	u    update
	k    killRequest
	prev *handedUpdate
}

// handedPool recycles handedUpdates: a burst hands over updates by the
// hundred thousand, and their garbage would bring the GC cycles that make
// the latency of the updates after them.
var handedPool = sync.Pool{New: func() any { return new(handedUpdate) }}

// handoff is the engine's stack of handed updates.
type handoff struct {
	// top is the update handed last; n counts the handed updates not yet
	// taken.
	top atomic.Pointer[handedUpdate]
	n   atomic.Int32
	// closed is set by Run's shutdown; pushing counts the callers between
	// their look at closed and their push.
	closed  atomic.Bool
	pushing atomic.Int32
}

// handOver hands u and k to the lock's holder. It reports false when the
// stack is full, and ErrStopped once Run's shutdown closed it; either way
// nothing was handed.
func (w *PodWorkers[T]) handOver(u update, k killRequest) (bool, error) {
	h := &w.handed
	if h.n.Load() >= maxHanded {
		return false, nil
	}
	h.pushing.Add(1)
	if h.closed.Load() {
		h.pushing.Add(-1)
		return false, ErrStopped
	}
	hu := handedPool.Get().(*handedUpdate)
	hu.u, hu.k = u, k
	for {
		hu.prev = h.top.Load()
		if h.top.CompareAndSwap(hu.prev, hu) {
			break
		}
	}
	h.n.Add(1)
	h.pushing.Add(-1)
	// The holder may have let go before the push: then nobody else will
	// apply it.
	if w.mu.TryLock() {
		w.takeHandedLocked()
		w.unlock()
	}
	return true, nil
}

// takeHandedLocked applies the handed updates, oldest first, while any are
// there. The caller holds the lock and gets it back held.
func (w *PodWorkers[T]) takeHandedLocked() {
	for {
		top := w.handed.top.Swap(nil)
		if top == nil {
			return
		}
		// Reverse the stack into handing order.
		var first *handedUpdate
		n := int32(0)
		for top != nil {
			prev := top.prev
			top.prev = first
			first, top = top, prev
			n++
		}
		w.handed.n.Add(-n)
		var fx effects
		w.prepareLocked(&fx)
		for hu := first; hu != nil; {
			w.m.update(hu.u, hu.k, &fx)
			next := hu.prev
			*hu = handedUpdate{} // holds no pod while pooled
			handedPool.Put(hu)
			hu = next
		}
		w.applyLocked(&fx, 0)
	}
}

// closeHandoffLocked closes the stack for Run's shutdown and applies what
// was handed before. The caller holds the lock; callers that looked at the
// stack before it closed finish their push in a few instructions, so
// waiting for them, yielding the CPU, is short.
func (w *PodWorkers[T]) closeHandoffLocked() {
	w.handed.closed.Store(true)
	for w.handed.pushing.Load() > 0 {
		runtime.Gosched()
	}
	w.takeHandedLocked()
}

// lock takes the engine's lock and applies the updates handed over while
// it was taken.
func (w *PodWorkers[T]) lock() {
	w.mu.Lock()
	w.takeHandedLocked()
}
