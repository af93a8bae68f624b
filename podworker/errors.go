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
	// ErrNotImplemented is wrapped by the error of a hook that the syncer
	// cannot run at all: a PodSyncerFuncs func that is nil where doing
	// nothing would report work not done, a Decorate of a syncer that
	// lacks the hook, and the engine's own call of
	// SyncTerminatingRuntimePod on a syncer without RuntimePodSyncer. The
	// engine treats it as any hook error: the hook is retried with
	// backoff, logged, and shown in PodInfo.LastSyncError; the pod does
	// not move on (a runtime pod's containers are not reported stopped).
	// A syncer of its own may return it the same way (test with
	// errors.Is).
	ErrNotImplemented = errors.New("podworker: not implemented")
)

// RetryAfter wraps err so that the engine retries the failed hook after d
// instead of after its own exponential backoff. A d below zero means "at
// once"; a d above Options.MaxBackOff (itself at most MaxDelay) is clamped
// to it, so that no delay a hook asks for, math.MaxInt64 included, can
// overflow the engine's clock and make it retry in a busy loop. The
// returned error unwraps to err and is a RetryDelayer. RetryAfter(nil, d)
// is nil.
//
// The engine finds the delay anywhere in the error a hook returns: wrapped
// with fmt.Errorf("...: %w", err), joined with errors.Join, or collected in
// a k8s.io/apimachinery/pkg/util/errors Aggregate (which has Errors() and
// no Unwrap), at any depth. When several delays are found, the shortest
// wins. At most 1024 errors of one tree are looked at, so that a cyclic or
// huge error cannot stall the engine; a delay beyond them is not seen.
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

// RetryDelayer is implemented by an error that says when the failed hook
// should be retried: RetryDelay returns the delay (see RetryAfter, which
// makes one). A syncer's own error type may implement it instead of being
// wrapped with RetryAfter; the engine looks for it in the whole error tree,
// as RetryAfter says.
type RetryDelayer interface {
	RetryDelay() time.Duration
}

// maxErrorNodes bounds how many errors of one tree retryDelayOf looks at,
// so that a huge (or cyclic) error from a hook cannot stall the engine.
const maxErrorNodes = 1024

// retryDelayOf finds the shortest retry delay carried anywhere in err's
// tree: through Unwrap() error, Unwrap() []error (errors.Join) and
// Errors() []error (apimachinery's Aggregate).
func retryDelayOf(err error) (time.Duration, bool) {
	var found bool
	var best time.Duration
	seen := 0
	var walk func(error)
	walk = func(e error) {
		for e != nil && seen < maxErrorNodes {
			seen++
			if r, ok := e.(RetryDelayer); ok {
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
			case interface{ Errors() []error }:
				for _, inner := range x.Errors() {
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

// errCompletedChReused is logged when the engine finds a CompletedCh
// already closed.
var errCompletedChReused = errors.New("podworker: CompletedCh closed twice")

// panicError is the failure a panicking hook turns into.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("podworker: hook panicked: %v", e.value) }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidUpdate}, args...)...)
}
