package podworkertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/podworker"
)

// Hook names one hook of podworker.PodSyncer or podworker.RuntimePodSyncer.
type Hook int

const (
	// HookSyncPod is PodSyncer.SyncPod.
	HookSyncPod Hook = iota + 1
	// HookSyncTerminatingPod is PodSyncer.SyncTerminatingPod.
	HookSyncTerminatingPod
	// HookSyncTerminatedPod is PodSyncer.SyncTerminatedPod.
	HookSyncTerminatedPod
	// HookSyncTerminatingRuntimePod is RuntimePodSyncer.SyncTerminatingRuntimePod.
	HookSyncTerminatingRuntimePod
)

// String returns the hook's method name, e.g. "SyncTerminatingPod".
func (h Hook) String() string {
	switch h {
	case HookSyncPod:
		return "SyncPod"
	case HookSyncTerminatingPod:
		return "SyncTerminatingPod"
	case HookSyncTerminatedPod:
		return "SyncTerminatedPod"
	case HookSyncTerminatingRuntimePod:
		return "SyncTerminatingRuntimePod"
	}
	return fmt.Sprintf("Hook(%d)", int(h))
}

// AnyUID, given to FakeSyncer.Next, Always or Hold in place of a UID, matches
// every UID that has no script or gate of its own.
const AnyUID types.UID = ""

// Result is what a FakeSyncer hook does once it is entered (and released,
// if held). The zero Result succeeds.
type Result struct {
	// Terminal is SyncPod's terminal result: the pod finished on its own.
	// Other hooks ignore it.
	Terminal bool
	// Err is the error the hook returns.
	Err error
	// Panic, when not nil, makes the hook panic with this value instead of
	// returning.
	Panic any
}

// Call is one hook call a FakeSyncer received. Pointers in it (Pod,
// MirrorPod) are the engine's and must not be mutated.
type Call[T any] struct {
	// Seq is the order in which calls were entered, across all UIDs,
	// starting at 1.
	Seq int
	// Hook is the hook that was called.
	Hook Hook
	// UID is the pod's UID (the RuntimePod's for HookSyncTerminatingRuntimePod).
	UID types.UID
	// UpdateType is SyncPod's update type; zero for other hooks.
	UpdateType podworker.UpdateType
	// Pod and MirrorPod are the hook's pod arguments (MirrorPod only for
	// SyncPod; both nil for HookSyncTerminatingRuntimePod).
	Pod, MirrorPod *v1.Pod
	// RuntimePod is the argument of HookSyncTerminatingRuntimePod.
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
	case HookSyncPod:
		s = "sync:" + c.UpdateType.String()
	case HookSyncTerminatingPod:
		s = fmt.Sprintf("kill(%d)", c.GracePeriod)
	case HookSyncTerminatedPod:
		s = "terminated"
	case HookSyncTerminatingRuntimePod:
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

type scriptKey struct {
	uid  types.UID
	hook Hook
}

// FakeSyncer is a podworker.PodSyncer[T] and podworker.RuntimePodSyncer for
// tests. It records every hook call with its arguments, returns results a
// test scripts per call or per UID, and can hold a hook until the test
// releases it, so a test makes a hook "slow" without sleeping.
//
// The zero value is ready to use: every hook succeeds at once (SyncPod
// reports the pod not terminal). All methods are safe for concurrent use,
// also while the engine calls the hooks.
//
// Within a testing/synctest bubble, create the FakeSyncer (or at least make
// its first call) inside the bubble, so the channels it blocks on belong to
// the bubble.
type FakeSyncer[T any] struct {
	// Clock stamps Call.Time. Defaults to the real clock (which a
	// testing/synctest bubble fakes). Set it before the engine runs.
	Clock clock.PassiveClock

	mu sync.Mutex
	// calls are in Seq order; a call's outcome is filled in when it returns.
	calls  []*Call[T]
	next   map[scriptKey][]Result
	always map[scriptKey]Result
	gates  map[scriptKey][]*Gate
	// inFlight counts running hooks per UID; total across UIDs.
	inFlight            map[types.UID]int
	total               int
	maxTotal, maxPerUID int
	// changed is closed (and replaced) whenever calls change.
	changed chan struct{}
}

var (
	_ podworker.PodSyncer[struct{}] = (*FakeSyncer[struct{}])(nil)
	_ podworker.RuntimePodSyncer    = (*FakeSyncer[struct{}])(nil)
)

// NewFakeSyncer returns a FakeSyncer whose hooks all succeed. It is the same
// as new(FakeSyncer[T]).
func NewFakeSyncer[T any]() *FakeSyncer[T] { return &FakeSyncer[T]{} }

// Next queues results for the next calls of hook for uid, one result per
// call, in order. Queued results are used before an Always result. uid may
// be AnyUID, whose queue serves UIDs that have none of their own.
func (f *FakeSyncer[T]) Next(uid types.UID, hook Hook, results ...Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		f.next = map[scriptKey][]Result{}
	}
	k := scriptKey{uid, hook}
	f.next[k] = append(f.next[k], results...)
}

// Always makes every call of hook for uid return r once the calls queued
// with Next are used up. uid may be AnyUID. Always(uid, hook, Result{})
// restores success.
func (f *FakeSyncer[T]) Always(uid types.UID, hook Hook, r Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.always == nil {
		f.always = map[scriptKey]Result{}
	}
	f.always[scriptKey{uid, hook}] = r
}

// Hold arms a gate on the next call of hook for uid (AnyUID: of any UID
// without a gate of its own) that starts after Hold returns. That call
// blocks until the test calls Release on the gate, and then returns its
// scripted result; if the hook's ctx ends first, the call returns ctx.Err()
// at once, as a well-behaved hook does (its scripted result is left for the
// next call). Several Holds on one uid and hook gate successive calls.
func (f *FakeSyncer[T]) Hold(uid types.UID, hook Hook) *Gate {
	return f.hold(uid, hook, false)
}

// HoldUncancelable is Hold for a hook that ignores its ctx: the call blocks
// until Release even when its ctx ends. Use it to check that the engine
// waits for hooks that do not honour cancellation.
func (f *FakeSyncer[T]) HoldUncancelable(uid types.UID, hook Hook) *Gate {
	return f.hold(uid, hook, true)
}

func (f *FakeSyncer[T]) hold(uid types.UID, hook Hook, ignoreCtx bool) *Gate {
	g := &Gate{
		entered:   make(chan struct{}),
		release:   make(chan struct{}),
		returned:  make(chan struct{}),
		ignoreCtx: ignoreCtx,
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gates == nil {
		f.gates = map[scriptKey][]*Gate{}
	}
	k := scriptKey{uid, hook}
	f.gates[k] = append(f.gates[k], g)
	return g
}

// SyncPod implements podworker.PodSyncer.
func (f *FakeSyncer[T]) SyncPod(ctx context.Context, updateType podworker.UpdateType, pod, mirrorPod *v1.Pod, status T) (bool, error) {
	r := f.do(ctx, &Call[T]{Hook: HookSyncPod, UID: pod.UID, UpdateType: updateType, Pod: pod, MirrorPod: mirrorPod, Status: status})
	return r.Terminal, r.Err
}

// SyncTerminatingPod implements podworker.PodSyncer.
func (f *FakeSyncer[T]) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, status T, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	return f.do(ctx, &Call[T]{Hook: HookSyncTerminatingPod, UID: pod.UID, Pod: pod, Status: status, GracePeriod: gracePeriod, PodStatusFunc: podStatusFn}).Err
}

// SyncTerminatedPod implements podworker.PodSyncer.
func (f *FakeSyncer[T]) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, status T) error {
	return f.do(ctx, &Call[T]{Hook: HookSyncTerminatedPod, UID: pod.UID, Pod: pod, Status: status}).Err
}

// SyncTerminatingRuntimePod implements podworker.RuntimePodSyncer.
func (f *FakeSyncer[T]) SyncTerminatingRuntimePod(ctx context.Context, pod podworker.RuntimePod) error {
	return f.do(ctx, &Call[T]{Hook: HookSyncTerminatingRuntimePod, UID: pod.UID, RuntimePod: pod}).Err
}

// do runs one hook call: record it, honour a gate, pick and apply its result.
func (f *FakeSyncer[T]) do(ctx context.Context, c *Call[T]) Result {
	g := f.enter(c)
	if g != nil && !g.hold(ctx) {
		r := Result{Err: ctx.Err()}
		f.exit(c, g, r, ctx)
		return r
	}
	r := f.result(c.UID, c.Hook)
	f.exit(c, g, r, ctx)
	if r.Panic != nil {
		panic(r.Panic)
	}
	return r
}

func (f *FakeSyncer[T]) enter(c *Call[T]) *Gate {
	if f.Clock != nil {
		c.Time = f.Clock.Now()
	} else {
		c.Time = time.Now()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c.Seq = len(f.calls) + 1
	f.calls = append(f.calls, c)
	if f.inFlight == nil {
		f.inFlight = map[types.UID]int{}
	}
	f.inFlight[c.UID]++
	f.maxPerUID = max(f.maxPerUID, f.inFlight[c.UID])
	f.total++
	f.maxTotal = max(f.maxTotal, f.total)
	f.notifyLocked()
	return f.takeLocked(f.gates, c.UID, c.Hook)
}

func (f *FakeSyncer[T]) exit(c *Call[T], g *Gate, r Result, ctx context.Context) {
	f.mu.Lock()
	c.Returned = true
	c.Terminal = r.Terminal && r.Err == nil && r.Panic == nil
	c.Err = r.Err
	c.Panicked = r.Panic != nil
	c.Canceled = ctx.Err() != nil
	if f.inFlight[c.UID]--; f.inFlight[c.UID] == 0 {
		delete(f.inFlight, c.UID)
	}
	f.total--
	f.notifyLocked()
	f.mu.Unlock()
	if g != nil {
		close(g.returned)
	}
}

// takeLocked pops the first gate for (uid, hook), falling back to AnyUID.
func (f *FakeSyncer[T]) takeLocked(m map[scriptKey][]*Gate, uid types.UID, hook Hook) *Gate {
	for _, k := range []scriptKey{{uid, hook}, {AnyUID, hook}} {
		if q := m[k]; len(q) > 0 {
			if len(q) == 1 {
				delete(m, k)
			} else {
				m[k] = q[1:]
			}
			return q[0]
		}
	}
	return nil
}

// result picks the scripted result of a call: the uid's queue, AnyUID's
// queue, the uid's Always, AnyUID's Always, or success.
func (f *FakeSyncer[T]) result(uid types.UID, hook Hook) Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range []scriptKey{{uid, hook}, {AnyUID, hook}} {
		if q := f.next[k]; len(q) > 0 {
			if len(q) == 1 {
				delete(f.next, k)
			} else {
				f.next[k] = q[1:]
			}
			return q[0]
		}
	}
	for _, k := range []scriptKey{{uid, hook}, {AnyUID, hook}} {
		if r, ok := f.always[k]; ok {
			return r
		}
	}
	return Result{}
}

func (f *FakeSyncer[T]) notifyLocked() {
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

func (f *FakeSyncer[T]) changedLocked() <-chan struct{} {
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return f.changed
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
func (f *FakeSyncer[T]) Count(uid types.UID, hook Hook) int {
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
