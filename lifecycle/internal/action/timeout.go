package action

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"
)

// ErrTimeout is the cause (context.Cause) of a ctx made by WithTimeout
// that ended because its time was up.
var ErrTimeout = errors.New("action: timed out")

// WithTimeout returns a ctx that ends when parent does or, when d is
// positive, d after now on clk, with cause ErrTimeout. The timer is the
// clock's, so a fake clock drives it. Call cancel once done with ctx; it
// stops the timer. A d of zero or less sets no timeout.
func WithTimeout(parent context.Context, clk clock.WithDelayedExecution, d time.Duration) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(parent)
	if d <= 0 {
		return ctx, func() { cancelCause(context.Canceled) }
	}
	// The fake clock runs f while it holds its own lock, so f must not
	// read the clock: it only cancels.
	t := clk.AfterFunc(d, func() { cancelCause(ErrTimeout) })
	return ctx, func() {
		t.Stop()
		cancelCause(context.Canceled)
	}
}

// TimedOut reports whether ctx ended because its WithTimeout time was up.
func TimedOut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrTimeout)
}
