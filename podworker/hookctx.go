package podworker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// hookCtx is the context a pod's hooks get. It carries the values of Run's
// context and is cancelled by the engine alone: when the pod's termination
// starts or its grace period shortens, and when Run shuts down. It exists
// instead of context.WithCancel so that thousands of pods do not register
// as children of one parent context (a map insert and delete per pod), and
// its channel is only made when a hook asks for it. It implements the
// AfterFunc method the context package looks for, so contexts a hook
// derives from it need no goroutine to follow its cancellation.
//
// It also knows whether anyone can see it cancelled (observed): a context
// whose Done was never called and that has no AfterFunc registered, while
// no hook runs with it, cannot be told from a live one except by Err, which
// only a hook may call. The machine keeps such a context instead of
// cancelling it and making another.
type hookCtx struct {
	values context.Context

	mu sync.Mutex
	// done is made on first Done and closed on cancel.
	done chan struct{}
	// after are the AfterFunc callbacks not yet run or stopped.
	after map[*func()]struct{}
	// state holds ctxObserved and ctxCancelled.
	state atomic.Uint32
}

const (
	ctxObserved uint32 = 1 << iota
	ctxCancelled
)

func (c *hookCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *hookCtx) Value(key any) any {
	if c.values == nil {
		return nil // not yet given its values (the machine's tests)
	}
	return c.values.Value(key)
}

// observed reports whether Done was called or an AfterFunc registered.
func (c *hookCtx) observed() bool { return c.state.Load()&ctxObserved != 0 }

func (c *hookCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.state.Or(ctxObserved)
		c.done = make(chan struct{})
		if c.state.Load()&ctxCancelled != 0 {
			close(c.done)
		}
	}
	return c.done
}

func (c *hookCtx) Err() error {
	if c.state.Load()&ctxCancelled != 0 {
		return context.Canceled
	}
	return nil
}

// cancel cancels the context; later calls do nothing. The driver calls it,
// outside its lock, when the machine asks.
func (c *hookCtx) cancel() {
	c.mu.Lock()
	if c.state.Load()&ctxCancelled != 0 {
		c.mu.Unlock()
		return
	}
	c.state.Or(ctxCancelled)
	if c.done != nil {
		close(c.done)
	}
	after := c.after
	c.after = nil
	c.mu.Unlock()
	for f := range after {
		go (*f)()
	}
}

// AfterFunc arranges for f to run in its own goroutine once c is
// cancelled; stop prevents that if it has not happened yet. The context
// package uses it to propagate cancellation to derived contexts.
func (c *hookCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.Or(ctxObserved)
	if c.state.Load()&ctxCancelled != 0 {
		go f()
		return func() bool { return false }
	}
	if c.after == nil {
		c.after = map[*func()]struct{}{}
	}
	key := &f
	c.after[key] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.after[key]; !ok {
			return false
		}
		delete(c.after, key)
		return true
	}
}

func (c *hookCtx) String() string { return "podworker.hookContext" }
