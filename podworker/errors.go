package podworker

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrStopped is returned (wrapped or as is; test with errors.Is) by
	// UpdatePod, KillPod and Run once the engine has shut down.
	ErrStopped = errors.New("podworker: stopped")
	// ErrInvalidUpdate is wrapped by every error UpdatePod and KillPod return
	// for input they reject. The message says what was wrong; nothing was
	// recorded for the pod.
	ErrInvalidUpdate = errors.New("podworker: invalid update")
)

// RetryAfter wraps err so that the engine retries the failed hook after d
// instead of after its own exponential backoff. A d below zero means "at
// once"; a d above Options.MaxBackOff is clamped to it. The returned error
// unwraps to err. RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, after: d}
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryDelay reports the delay the error asks for.
func (e *retryAfterError) RetryDelay() time.Duration { return e.after }

// retryDelayOf finds the earliest retry delay carried anywhere in err's tree.
func retryDelayOf(err error) (time.Duration, bool) {
	var found bool
	var best time.Duration
	var walk func(error)
	walk = func(e error) {
		for e != nil {
			if r, ok := e.(interface{ RetryDelay() time.Duration }); ok {
				if d := r.RetryDelay(); !found || d < best {
					best, found = d, true
				}
			}
			switch x := e.(type) {
			case interface{ Unwrap() []error }:
				for _, inner := range x.Unwrap() {
					walk(inner)
				}
				return
			case interface{ Unwrap() error }:
				e = x.Unwrap()
			default:
				return
			}
		}
	}
	walk(err)
	return best, found
}

// panicError is the failure a panicking hook turns into.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("podworker: hook panicked: %v", e.value) }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidUpdate}, args...)...)
}
