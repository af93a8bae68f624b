package podworkertest

import (
	"context"
	"sync"
)

// Gate holds one hook call of a FakeSyncer (see FakeSyncer.Hold). Its
// methods are safe for concurrent use.
type Gate struct {
	entered, release, returned chan struct{}
	enterOnce, releaseOnce     sync.Once
	ignoreCtx                  bool
}

// hold blocks the calling hook; it reports false when ctx ended first.
func (g *Gate) hold(ctx context.Context) bool {
	g.enterOnce.Do(func() { close(g.entered) })
	if g.ignoreCtx {
		<-g.release
		return true
	}
	select {
	case <-g.release:
		return true
	default:
	}
	select {
	case <-g.release:
		return true
	case <-ctx.Done():
		return false
	}
}

// Wait blocks until the held hook has been entered, or ctx ends (then it
// returns ctx.Err()).
func (g *Gate) Wait(ctx context.Context) error {
	select {
	case <-g.entered:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Entered returns a channel closed once the held hook has been entered.
func (g *Gate) Entered() <-chan struct{} { return g.entered }

// Release lets the held hook finish with its scripted result. It may be
// called before the hook is entered (the hook then does not block) and
// more than once.
func (g *Gate) Release() { g.releaseOnce.Do(func() { close(g.release) }) }

// Returned returns a channel closed once the held hook has returned (or
// panicked).
func (g *Gate) Returned() <-chan struct{} { return g.returned }
