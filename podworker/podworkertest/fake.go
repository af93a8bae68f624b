package podworkertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/podworker"
)

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

type scriptKey struct {
	uid  types.UID
	hook podworker.Hook
}

// FakeSyncer is a podworker.PodSyncer[T] and podworker.RuntimePodSyncer for
// tests. It records every hook call with its arguments, returns results a
// test scripts per call or per UID, and can hold a hook until the test
// releases it, so a test makes a hook "slow" without sleeping.
//
// The zero value is ready to use: every hook succeeds at once (SyncPod
// reports the pod not terminal). With a Delegate (see NewSpySyncer) it is a
// spy instead: every call without a scripted result goes to the real syncer,
// and what it returned is recorded. All methods are safe for concurrent use,
// also while the engine calls the hooks.
//
// Within a testing/synctest bubble, create the FakeSyncer (or at least make
// its first call) inside the bubble, so the channels it blocks on belong to
// the bubble.
type FakeSyncer[T any] struct {
	// Clock stamps Call.Time. Defaults to the real clock (which a
	// testing/synctest bubble fakes). Set it before the engine runs.
	Clock clock.PassiveClock
	// Delegate, when set, is the real syncer behind the fake: a call that
	// has no result scripted with Next or Always is passed to it (with the
	// same ctx and arguments, once a gate on the call, if any, is
	// released), and its result, error or panic is recorded and returned
	// (a panic is re-raised with the same value). A scripted result is
	// returned instead of calling the Delegate, so a test can inject a
	// failure into a real syncer. SyncTerminatingRuntimePod goes to the
	// Delegate's podworker.RuntimePodSyncer, and fails with
	// ErrNoRuntimePodSyncer when it has none or its hook is not
	// implemented (podworker.ErrNotImplemented). Set it before the engine
	// runs. Defaults to none: unscripted calls succeed.
	Delegate podworker.PodSyncer[T]

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

// NewSpySyncer returns a FakeSyncer that passes every call to real (see
// FakeSyncer.Delegate): it records each call and what real returned, and
// still holds calls with Hold and replaces results scripted with Next or
// Always. Use it to test a real syncer under the engine, while reading its
// hook calls as a trace.
//
// A nil real means no delegate: NewSpySyncer(nil) is NewFakeSyncer(), whose
// unscripted calls all succeed at once (SyncTerminatingRuntimePod too, not
// ErrNoRuntimePodSyncer). A nil pointer of a syncer type is not a nil
// interface: it is a delegate, and its methods are called.
func NewSpySyncer[T any](real podworker.PodSyncer[T]) *FakeSyncer[T] {
	return &FakeSyncer[T]{Delegate: real}
}

// ErrNoRuntimePodSyncer is returned by a spy's SyncTerminatingRuntimePod
// when its Delegate cannot stop runtime pods: it does not implement
// podworker.RuntimePodSyncer, or its hook returns an error wrapping
// podworker.ErrNotImplemented (which the spy returns wrapped in this one).
// It wraps podworker.ErrNotImplemented, so the engine retries the kill with
// backoff, as it does for a syncer without that interface.
var ErrNoRuntimePodSyncer = fmt.Errorf("podworkertest: the delegate cannot stop runtime pods: %w", podworker.ErrNotImplemented)

// Next queues results for the next calls of hook for uid, one result per
// call, in order. Queued results are used before an Always result. uid may
// be AnyUID, whose queue serves UIDs that have none of their own.
func (f *FakeSyncer[T]) Next(uid types.UID, hook podworker.Hook, results ...Result) {
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
// makes the calls succeed (for a spy: without calling its Delegate).
func (f *FakeSyncer[T]) Always(uid types.UID, hook podworker.Hook, r Result) {
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
func (f *FakeSyncer[T]) Hold(uid types.UID, hook podworker.Hook) *Gate {
	return f.hold(uid, hook, false)
}

// HoldUncancelable is Hold for a hook that ignores its ctx: the call blocks
// until Release even when its ctx ends. Use it to check that the engine
// waits for hooks that do not honour cancellation.
func (f *FakeSyncer[T]) HoldUncancelable(uid types.UID, hook podworker.Hook) *Gate {
	return f.hold(uid, hook, true)
}

func (f *FakeSyncer[T]) hold(uid types.UID, hook podworker.Hook, ignoreCtx bool) *Gate {
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
	r := f.do(ctx, &Call[T]{Hook: podworker.HookSyncPod, UID: pod.UID, UpdateType: updateType, Pod: pod, MirrorPod: mirrorPod, Status: status}, func(d podworker.PodSyncer[T]) (bool, error) {
		return d.SyncPod(ctx, updateType, pod, mirrorPod, status)
	})
	return r.Terminal, r.Err
}

// SyncTerminatingPod implements podworker.PodSyncer.
func (f *FakeSyncer[T]) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, status T, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	return f.do(ctx, &Call[T]{Hook: podworker.HookSyncTerminatingPod, UID: pod.UID, Pod: pod, Status: status, GracePeriod: gracePeriod, PodStatusFunc: podStatusFn}, func(d podworker.PodSyncer[T]) (bool, error) {
		return false, d.SyncTerminatingPod(ctx, pod, status, gracePeriod, podStatusFn)
	}).Err
}

// SyncTerminatedPod implements podworker.PodSyncer.
func (f *FakeSyncer[T]) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, status T) error {
	return f.do(ctx, &Call[T]{Hook: podworker.HookSyncTerminatedPod, UID: pod.UID, Pod: pod, Status: status}, func(d podworker.PodSyncer[T]) (bool, error) {
		return false, d.SyncTerminatedPod(ctx, pod, status)
	}).Err
}

// SyncTerminatingRuntimePod implements podworker.RuntimePodSyncer.
func (f *FakeSyncer[T]) SyncTerminatingRuntimePod(ctx context.Context, pod podworker.RuntimePod) error {
	return f.do(ctx, &Call[T]{Hook: podworker.HookSyncTerminatingRuntimePod, UID: pod.UID, RuntimePod: pod}, func(d podworker.PodSyncer[T]) (bool, error) {
		err := podworker.SyncTerminatingRuntimePod(ctx, d, pod)
		if errors.Is(err, podworker.ErrNotImplemented) {
			err = fmt.Errorf("%w: %w", ErrNoRuntimePodSyncer, err)
		}
		return false, err
	}).Err
}

// do runs one hook call: record it, honour a gate, pick its result (the
// script's, else the Delegate's), record and apply it.
func (f *FakeSyncer[T]) do(ctx context.Context, c *Call[T], delegate func(podworker.PodSyncer[T]) (bool, error)) Result {
	g := f.enter(c)
	if g != nil && !g.hold(ctx) {
		r := Result{Err: ctx.Err()}
		f.exit(c, g, r, ctx)
		return r
	}
	r, scripted := f.result(c.UID, c.Hook)
	if !scripted && f.Delegate != nil {
		r = callDelegate(f.Delegate, delegate)
	}
	f.exit(c, g, r, ctx)
	if r.Panic != nil {
		panic(r.Panic)
	}
	return r
}

// callDelegate makes the real call, turning a panic into a Result that
// re-raises it once recorded.
func callDelegate[T any](d podworker.PodSyncer[T], call func(podworker.PodSyncer[T]) (bool, error)) (r Result) {
	defer func() {
		if p := recover(); p != nil {
			r = Result{Panic: p}
		}
	}()
	r.Terminal, r.Err = call(d)
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
func (f *FakeSyncer[T]) takeLocked(m map[scriptKey][]*Gate, uid types.UID, hook podworker.Hook) *Gate {
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
// queue, the uid's Always, AnyUID's Always; scripted is false when none
// applies (the call succeeds, or goes to the Delegate).
func (f *FakeSyncer[T]) result(uid types.UID, hook podworker.Hook) (r Result, scripted bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range []scriptKey{{uid, hook}, {AnyUID, hook}} {
		if q := f.next[k]; len(q) > 0 {
			if len(q) == 1 {
				delete(f.next, k)
			} else {
				f.next[k] = q[1:]
			}
			return q[0], true
		}
	}
	for _, k := range []scriptKey{{uid, hook}, {AnyUID, hook}} {
		if r, ok := f.always[k]; ok {
			return r, true
		}
	}
	return Result{}, false
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
