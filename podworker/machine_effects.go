package podworker

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The effects of a machine call, and every helper of the machine that emits
// one: what a call asks the driver to do is decided here, in one place,
// whatever transition asks for it. The driver applies them (step.go).
//
//   - moved: a stage change to publish (moves);
//   - closeAll, closeCompleted, keepOrClose: CompletedChs to close (closes);
//   - cancelHooks: a hook context to cancel (cancels), and a slow-hook watch;
//   - remove, forget: a record taken out, which closes, cancels and frees
//     its static slot;
//   - makeReady: work in a ready queue, for a worker to take (ready);
//   - delay: a retry, resync or slow-hook report scheduled, which may wake
//     the timer loop (wake).
//
// fireDue (machine_hooks.go) adds the slow hooks it finds (slow), and
// complete the UID whose hook returned (returned).

// effects are what one call of the machine asks the driver to do. The
// driver passes a zero effects, and applies it after the call.
type effects struct {
	// moves are the stage changes of the call, in order.
	moves smallBuf[move]
	// closes are the CompletedChs that must be closed now.
	closes smallBuf[closeReq]
	// cancels are the hook contexts that must be cancelled now.
	cancels smallBuf[*hookCtx]
	// slow are hooks still running after their context was cancelled.
	slow []slowHook
	// returned is the UID whose hook returned (complete), "" if none: its
	// snapshot changed even when its stage did not.
	returned types.UID
	// ready: a ready queue gained work; a worker should take it.
	ready bool
	// wake: the delay heap's first due time moved earlier; the timer loop
	// should look again.
	wake bool
	// quiet is set by the driver when nobody counts or watches stage
	// changes: moves are then not recorded.
	quiet bool
}

// move is one stage change of a worker.
type move struct {
	uid      types.UID
	rec      *record
	from, to Stage
}

// closeReq is one CompletedCh to close, and the pod it belongs to (to name
// it, should the channel already be closed).
type closeReq struct {
	ch  chan<- struct{}
	rec *record
}

// slowHook is a hook still running slowWarning (or a multiple of it) after
// its context was cancelled, for the driver to report.
type slowHook struct {
	uid      types.UID
	fullName string
	hook     Hook
	// cancelled is how long ago the hook's context was cancelled.
	cancelled time.Duration
	// first: this is the first report of this hook call.
	first bool
}

// smallBuf is an append-only list that keeps its first items inline, so
// that a call with few effects allocates nothing.
type smallBuf[T any] struct {
	n      int
	inline [2]T
	more   []T
}

func (b *smallBuf[T]) add(v T) {
	if b.n < len(b.inline) {
		b.inline[b.n] = v
	} else {
		b.more = append(b.more, v)
	}
	b.n++
}

func (b *smallBuf[T]) len() int { return b.n }

func (b *smallBuf[T]) at(i int) T {
	if i < len(b.inline) {
		return b.inline[i]
	}
	return b.more[i-len(b.inline)]
}

// moved records r's stage change from from, if it changed.
func (m *machine) moved(r *record, from Stage, fx *effects) {
	if fx.quiet {
		return
	}
	to := r.stage()
	if r.has(fForgotten) {
		to = StageAbsent
	}
	if from != to && !fx.quiet {
		fx.moves.add(move{uid: r.uid, rec: r, from: from, to: to})
	}
}

// closeAll has every non-nil channel of chans closed.
func (m *machine) closeAll(r *record, chans []chan<- struct{}, fx *effects) {
	for _, ch := range chans {
		if ch != nil {
			fx.closes.add(closeReq{ch: ch, rec: r})
		}
	}
}

// closeCompleted has every channel waiting on r closed, and forgets them.
func (m *machine) closeCompleted(r *record, fx *effects) {
	if r.completed == nil {
		return
	}
	m.closeAll(r, *r.completed, fx)
	r.completed = nil
}

// keepOrClose attaches a request's channels to r, or has them closed when
// r can no longer have running containers.
func (m *machine) keepOrClose(r *record, k killRequest, fx *effects) {
	if r.has(fTerminated) || r.has(fFinished) {
		m.closeAll(r, k.chans[:], fx)
		return
	}
	r.addCompleted(k.chans[:])
}

// cancelHooks asks for the context of r's hooks to be cancelled, when that
// can matter: a hook runs now, or something is listening to the context
// (Done was called, or an AfterFunc registered, by a hook or a context
// derived from it). A context nobody can see cancelled is kept for the next
// hook instead, which saves a context per termination. A hook running now
// is watched: if it still runs slowWarning later, fireDue reports it.
func (m *machine) cancelHooks(r *record, fx *effects) {
	c := r.ctx
	if c == nil || (!r.has(fRunning) && !c.observed()) {
		return
	}
	r.ctx = nil
	fx.cancels.add(c)
	if r.has(fRunning) && m.cfg.slowWarning > 0 && !r.has(fTimed) {
		r.slowWarnings = 0
		m.delay(r, m.now().after(m.cfg.slowWarning), fx)
	}
}

// remove takes r out of the machine without reporting the stage change:
// its channels are closed and its context cancelled if anyone listens.
func (m *machine) remove(r *record, fx *effects) {
	m.unqueue(r)
	m.releaseStatic(r, fx)
	m.cancelHooks(r, fx)
	r.ctx = nil
	m.closeCompleted(r, fx)
	if m.bulk {
		m.bulkForgotten++ // syncKnown takes it out of the map
	} else {
		delete(m.records, r.uid)
	}
	r.flags |= fForgotten
}

// forget removes r entirely and reports it. r's hook must not be running.
func (m *machine) forget(r *record, fx *effects) {
	from := r.stage()
	m.remove(r, fx)
	m.moved(r, from, fx)
}

// makeReady puts r in the ready queue that fits its work, unless its hook
// is running (complete looks for pending work when the hook returns), and
// tells the driver there is work.
func (m *machine) makeReady(r *record, fx *effects) {
	if r.has(fRunning) {
		return
	}
	r.flags &^= fTimed // its timer, if any, is stale now
	fx.ready = true
	terminating := r.nextHook() != HookSyncPod
	if r.has(fQueued) {
		if !terminating || r.has(fQueuedTerm) {
			return
		}
		// Its work turned into termination work: move it to that queue.
		m.readySync.remove(r)
		m.readyTerm.push(r)
		r.flags |= fQueuedTerm
		return
	}
	r.flags |= fQueued
	if terminating {
		r.flags |= fQueuedTerm
		m.readyTerm.push(r)
	} else {
		m.readySync.push(r)
	}
}

// delay schedules r's next retry or resync (or, while its hook runs, the
// next slow-hook report) at due, reusing its heap entry if it has one.
func (m *machine) delay(r *record, due tick, fx *effects) {
	r.flags |= fTimed
	if r.heapIdx >= 0 {
		m.delayed.Fix(r, int64(due))
	} else {
		m.delayed.Push(r, int64(due))
	}
	if first, _, _ := m.delayed.Peek(); first == r {
		fx.wake = true
	}
}
