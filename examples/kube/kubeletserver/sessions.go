package kubeletserver

import "sync"

// sessionGroup counts the handlers of long-lived sessions, so that
// shutting down can wait for them: http.Server.Shutdown does not wait for
// hijacked connections. Safe for concurrent use.
type sessionGroup struct {
	mu sync.Mutex
	// closed is set by closeAndWait; enter refuses from then on.
	closed bool
	wg     sync.WaitGroup
}

// enter counts a session in, or says false once the group is closed.
func (g *sessionGroup) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// leave counts a session out; call it once per successful enter.
func (g *sessionGroup) leave() { g.wg.Done() }

// closeAndWait refuses new sessions and waits for those running.
func (g *sessionGroup) closeAndWait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
