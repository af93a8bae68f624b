package podworker

import (
	"context"
	"sync"
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
type hookCtx struct {
	values context.Context

	mu    sync.Mutex
	done  chan struct{} // made on first Done, closed on cancel
	err   error
	after map[*func()]struct{}
}

func newHookCtx(values context.Context) *hookCtx { return &hookCtx{values: values} }

func (c *hookCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *hookCtx) Value(key any) any           { return c.values.Value(key) }

func (c *hookCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

func (c *hookCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// cancel cancels the context; later calls do nothing.
func (c *hookCtx) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
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
	if c.err != nil {
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
