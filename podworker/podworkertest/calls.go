package podworkertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// Call is one hook call a FakeSyncer received. Pointers in it (Pod,
// MirrorPod) are the engine's and must not be mutated.
type Call[T any] struct {
	// Seq is the order in which calls were entered, across all UIDs,
	// starting at 1.
	Seq int
	// Hook is the hook that was called.
	Hook podworker.Hook
	// UID is the pod's UID (the RuntimePod's for podworker.HookSyncTerminatingRuntimePod).
	UID types.UID
	// UpdateType is SyncPod's update type; zero for other hooks.
	UpdateType podworker.UpdateType
	// Pod and MirrorPod are the hook's pod arguments (MirrorPod only for
	// SyncPod; both nil for podworker.HookSyncTerminatingRuntimePod).
	Pod, MirrorPod *v1.Pod
	// RuntimePod is the argument of podworker.HookSyncTerminatingRuntimePod.
	RuntimePod podworker.RuntimePod
	// GracePeriod is SyncTerminatingPod's grace period in seconds; zero for
	// other hooks.
	GracePeriod int64
	// PodStatusFunc is SyncTerminatingPod's podStatusFn.
	PodStatusFunc func(*v1.PodStatus)
	// Status is the status argument the hook was given.
	Status T
	// Time is when the hook was entered, by FakeSyncer.Clock.
	Time time.Time

	// Returned is true once the hook has returned (or panicked); the
	// fields below are set then.
	Returned bool
	// Terminal and Err are what the hook returned.
	Terminal bool
	Err      error
	// Panicked is true when the hook panicked.
	Panicked bool
	// Canceled is true when the hook's ctx was done when it returned.
	Canceled bool
}

// token is the call's word in a trace (see FakeSyncer.Trace).
func (c *Call[T]) token() string {
	var s string
	switch c.Hook {
	case podworker.HookSyncPod:
		s = "sync:" + c.UpdateType.String()
	case podworker.HookSyncTerminatingPod:
		s = fmt.Sprintf("kill(%d)", c.GracePeriod)
	case podworker.HookSyncTerminatedPod:
		s = "terminated"
	case podworker.HookSyncTerminatingRuntimePod:
		s = "kill-runtime"
	default:
		s = c.Hook.String()
	}
	if !c.Returned {
		return s
	}
	switch {
	case c.Panicked:
		s += "=panic"
	case errors.Is(c.Err, context.Canceled) || errors.Is(c.Err, context.DeadlineExceeded):
		s += "=canceled"
	case c.Err != nil:
		s += "=error"
	case c.Terminal:
		s += "=terminal"
	}
	return s
}

func (f *FakeSyncer[T]) snapshotLocked(uid types.UID, all bool) []Call[T] {
	out := make([]Call[T], 0, len(f.calls))
	for _, c := range f.calls {
		if all || c.UID == uid {
			out = append(out, *c)
		}
	}
	return out
}

// Calls returns every call received so far, in the order they were entered.
// Calls still running have Returned false. The slice is the caller's.
func (f *FakeSyncer[T]) Calls() []Call[T] {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snapshotLocked("", true)
}

// CallsFor returns the calls received for uid, in order.
func (f *FakeSyncer[T]) CallsFor(uid types.UID) []Call[T] {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snapshotLocked(uid, false)
}

// Count returns how many calls of hook were received for uid (AnyUID: for
// every UID).
func (f *FakeSyncer[T]) Count(uid types.UID, hook podworker.Hook) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.Hook == hook && (uid == AnyUID || c.UID == uid) {
			n++
		}
	}
	return n
}

// Trace returns the calls received for uid as one line of space-separated
// words, in order: "sync:<update type>" for SyncPod, "kill(<grace>)" for
// SyncTerminatingPod, "terminated" for SyncTerminatedPod and
// "kill-runtime" for SyncTerminatingRuntimePod. A call that has returned
// other than plainly successfully carries its outcome: "=terminal",
// "=error", "=canceled" (the error is a context error) or "=panic". For
// example: "sync:create sync:sync=error kill(30) terminated".
func (f *FakeSyncer[T]) Trace(uid types.UID) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.traceLocked(uid)
}

func (f *FakeSyncer[T]) traceLocked(uid types.UID) string {
	var b strings.Builder
	for _, c := range f.calls {
		if c.UID != uid {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c.token())
	}
	return b.String()
}

// InFlight returns how many hooks are running now, across all UIDs.
func (f *FakeSyncer[T]) InFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

// MaxInFlight returns the most hooks that ever ran at once, across all UIDs.
func (f *FakeSyncer[T]) MaxInFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxTotal
}

// MaxInFlightPerUID returns the most hooks that ever ran at once for one UID.
// The engine serializes the hooks of a UID, so it is at most 1.
func (f *FakeSyncer[T]) MaxInFlightPerUID() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxPerUID
}

// WaitForCalls blocks until cond, given every call so far (as Calls returns
// them), returns true, and returns those calls. cond is evaluated at once
// and again after each call is entered or returns, without the FakeSyncer's
// lock. On ctx's end it returns the last calls it saw and ctx.Err().
func (f *FakeSyncer[T]) WaitForCalls(ctx context.Context, cond func(calls []Call[T]) bool) ([]Call[T], error) {
	for {
		f.mu.Lock()
		calls := f.snapshotLocked("", true)
		changed := f.changedLocked()
		f.mu.Unlock()
		if cond(calls) {
			return calls, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return calls, ctx.Err()
		}
	}
}

// WaitForTrace blocks until Trace(uid) equals want. On ctx's end it returns
// an error that wraps ctx.Err() and shows the last trace seen.
func (f *FakeSyncer[T]) WaitForTrace(ctx context.Context, uid types.UID, want string) error {
	for {
		f.mu.Lock()
		got := f.traceLocked(uid)
		changed := f.changedLocked()
		f.mu.Unlock()
		if got == want {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("podworkertest: trace of pod %s is %q, want %q: %w", uid, got, want, ctx.Err())
		}
	}
}
