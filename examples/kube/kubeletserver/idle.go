package kubeletserver

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// idleTimer calls expire once a stream has seen no activity for timeout.
// One timer is armed at a time: when it fires early (there was activity
// since), it is armed again for the rest. Safe for concurrent use.
type idleTimer struct {
	clock   clock.WithDelayedExecution
	timeout time.Duration
	expire  func()

	mu sync.Mutex
	// last is the time of the latest activity.
	last    time.Time
	timer   clock.Timer
	stopped bool
}

// newIdleTimer arms a timer that calls expire (from a goroutine of its
// own) after timeout without activity.
func newIdleTimer(c clock.WithDelayedExecution, timeout time.Duration, expire func()) *idleTimer {
	t := &idleTimer{clock: c, timeout: timeout, expire: expire, last: c.Now()}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timer = c.AfterFunc(timeout, t.fired)
	return t
}

// activity records that the stream moved now.
func (t *idleTimer) activity() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = t.clock.Now()
}

// stop disarms the timer; expire is not called after it returns unless
// it was already running.
func (t *idleTimer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.timer.Stop()
}

// fired runs check on a goroutine of its own: a fake clock calls its
// AfterFunc functions holding its lock, which check's reading of the
// time would wait for.
func (t *idleTimer) fired() { go t.check() }

func (t *idleTimer) check() {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	if rest := t.timeout - t.clock.Since(t.last); rest > 0 {
		t.timer = t.clock.AfterFunc(rest, t.fired)
		t.mu.Unlock()
		return
	}
	t.stopped = true
	t.mu.Unlock()
	t.expire()
}
