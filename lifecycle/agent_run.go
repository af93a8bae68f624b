package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Run runs the agent until ctx ends or a part of it fails, then stops it
// and returns once nothing it started runs any more:
//
//  1. It starts every runnable (Add), then every source (AddSource, each
//     sending to Config), then the sync loop (SyncLoop.Run over Config's
//     updates), which runs the pod workers.
//  2. When ctx ends, or any of them returns an error (the first error
//     wins), it stops the sources and the sync loop; the sync loop returns
//     once the pod workers have drained (every hook has returned).
//  3. Then it stops the runnables and waits for them, so the last hooks'
//     events and statuses still get out.
//
// It returns nil when ctx ended and every part stopped cleanly (a part's
// error that only says ctx ended does not count), and otherwise the first
// failure, naming its part ("lifecycle: source \"api\": ..."). Run may be
// called once; a second call returns an error at once. Call it from a
// goroutine of its own.
func (a *Agent[T]) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return errors.New("lifecycle: Agent.Run called twice")
	}
	a.started = true
	sources, runnables := a.sources, a.runnables
	a.mu.Unlock()

	g := newGroup(ctx)
	for _, nr := range runnables {
		g.goAux("runnable "+nr.name, nr.r.Run)
	}
	for _, src := range sources {
		g.goLoop(fmt.Sprintf("source %q", src.Source()), func(ctx context.Context) error { return src.Run(ctx, a.config) })
	}
	g.goLoop("sync loop", func(ctx context.Context) error { return a.loop.Run(ctx, a.config.Updates()) })
	a.log.Info("Agent running", "sources", len(sources), "runnables", len(runnables))
	err := g.wait()
	a.log.Info("Agent stopped")
	return err
}

// group runs an agent's parts in two tiers: the loop tier (the sync loop
// and the sources) stops first, when ctx ends or any part fails; the aux
// tier (the runnables) stops once the loop tier has returned, or when any
// part fails.
type group struct {
	// loopCtx ends with parent or on a failure; auxCtx on a failure or
	// once the loop tier returned.
	loopCtx, auxCtx   context.Context
	stopLoop, stopAux context.CancelFunc
	loopTier, auxTier sync.WaitGroup
	mu                sync.Mutex
	firstErr          error
}

func newGroup(parent context.Context) *group {
	g := &group{}
	g.loopCtx, g.stopLoop = context.WithCancel(parent)
	g.auxCtx, g.stopAux = context.WithCancel(context.WithoutCancel(parent))
	return g
}

// goLoop runs fn in the loop tier.
func (g *group) goLoop(name string, fn func(context.Context) error) {
	g.loopTier.Go(func() { g.report(name, g.loopCtx, fn(g.loopCtx)) })
}

// goAux runs fn in the aux tier.
func (g *group) goAux(name string, fn func(context.Context) error) {
	g.auxTier.Go(func() { g.report(name, g.auxCtx, fn(g.auxCtx)) })
}

// report records what part name returned. An error is a failure unless it
// only says that ctx, the part's own context, ended. A failure stops
// both tiers.
func (g *group) report(name string, ctx context.Context, err error) {
	if err == nil || (ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))) {
		return
	}
	g.mu.Lock()
	if g.firstErr == nil {
		g.firstErr = fmt.Errorf("lifecycle: %s: %w", name, err)
	}
	g.mu.Unlock()
	g.stopLoop()
	g.stopAux()
}

// wait waits for the loop tier, stops the aux tier, waits for it, and
// returns the first failure.
func (g *group) wait() error {
	g.loopTier.Wait()
	g.stopAux()
	g.auxTier.Wait()
	g.stopLoop()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.firstErr
}
