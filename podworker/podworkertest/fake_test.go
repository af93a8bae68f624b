package podworkertest_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

var errBoom = errors.New("boom")

func TestFakeSyncerRecordsEveryHookWithItsArguments(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Unix(100, 0))
	f := podworkertest.FakeSyncer[string]{Clock: fc}
	ctx := context.Background()
	pod := podworkertest.NewPod("u1", "ns", "a")
	mirror := podworkertest.NewPod("m1", "ns", "a")
	statusFn := func(*v1.PodStatus) {}

	terminal, err := f.SyncPod(ctx, podworker.SyncPodCreate, pod, mirror, "s1")
	require.NoError(t, err)
	require.False(t, terminal)
	fc.Step(time.Second)
	require.NoError(t, f.SyncTerminatingPod(ctx, pod, "s2", 30, statusFn))
	require.NoError(t, f.SyncTerminatedPod(ctx, pod, "s3"))
	require.NoError(t, f.SyncTerminatingRuntimePod(ctx, podworker.RuntimePod{UID: "u2", Namespace: "ns", Name: "b"}))

	calls := f.Calls()
	require.Len(t, calls, 4)
	c := calls[0]
	assert.Equal(t, 1, c.Seq)
	assert.Equal(t, podworker.HookSyncPod, c.Hook)
	assert.Equal(t, pod.UID, c.UID)
	assert.Equal(t, podworker.SyncPodCreate, c.UpdateType)
	assert.Same(t, pod, c.Pod)
	assert.Same(t, mirror, c.MirrorPod)
	assert.Equal(t, "s1", c.Status)
	assert.Equal(t, time.Unix(100, 0), c.Time)
	assert.True(t, c.Returned)
	assert.False(t, c.Canceled)

	c = calls[1]
	assert.Equal(t, 2, c.Seq)
	assert.Equal(t, podworker.HookSyncTerminatingPod, c.Hook)
	assert.Equal(t, int64(30), c.GracePeriod)
	assert.NotNil(t, c.PodStatusFunc)
	assert.Equal(t, "s2", c.Status)
	assert.Equal(t, time.Unix(101, 0), c.Time)

	assert.Equal(t, podworker.HookSyncTerminatedPod, calls[2].Hook)
	assert.Equal(t, "s3", calls[2].Status)

	c = calls[3]
	assert.Equal(t, podworker.HookSyncTerminatingRuntimePod, c.Hook)
	assert.Equal(t, podworker.RuntimePod{UID: "u2", Namespace: "ns", Name: "b"}, c.RuntimePod)
	assert.Equal(t, c.RuntimePod.UID, c.UID)
	assert.Nil(t, c.Pod)

	assert.Equal(t, "sync:create kill(30) terminated", f.Trace("u1"))
	assert.Equal(t, "kill-runtime", f.Trace("u2"))
	assert.Len(t, f.CallsFor("u1"), 3)
	assert.Equal(t, 1, f.Count("u1", podworker.HookSyncPod))
	assert.Equal(t, 2, f.Count(podworkertest.AnyUID, podworker.HookSyncTerminatingPod)+f.Count(podworkertest.AnyUID, podworker.HookSyncTerminatingRuntimePod))
}

func TestFakeSyncerScripts(t *testing.T) {
	ctx := context.Background()
	a, b := podworkertest.NewPod("a", "ns", "a"), podworkertest.NewPod("b", "ns", "b")
	sync := func(f *podworkertest.FakeSyncer[struct{}], p *v1.Pod) (bool, error) {
		return f.SyncPod(ctx, podworker.SyncPodSync, p, nil, struct{}{})
	}

	t.Run("Next is used per call, in order, then Always, then success", func(t *testing.T) {
		var f podworkertest.FakeSyncer[struct{}]
		f.Next("a", podworker.HookSyncPod, podworkertest.Result{Err: errBoom}, podworkertest.Result{Terminal: true})
		f.Always("a", podworker.HookSyncPod, podworkertest.Result{Err: context.Canceled})

		_, err := sync(&f, a)
		require.ErrorIs(t, err, errBoom)
		terminal, err := sync(&f, a)
		require.NoError(t, err)
		require.True(t, terminal)
		for range 2 {
			_, err = sync(&f, a)
			require.ErrorIs(t, err, context.Canceled)
		}
		// Other UIDs and other hooks are not affected.
		terminal, err = sync(&f, b)
		require.NoError(t, err)
		require.False(t, terminal)
		require.NoError(t, f.SyncTerminatedPod(ctx, a, struct{}{}))

		f.Always("a", podworker.HookSyncPod, podworkertest.Result{})
		_, err = sync(&f, a)
		require.NoError(t, err)
		assert.Equal(t, "sync:sync=error sync:sync=terminal sync:sync=canceled sync:sync=canceled terminated sync:sync", f.Trace("a"))
	})

	t.Run("a UID's own script wins over AnyUID's", func(t *testing.T) {
		var f podworkertest.FakeSyncer[struct{}]
		f.Always(podworkertest.AnyUID, podworker.HookSyncPod, podworkertest.Result{Err: errBoom})
		f.Next(podworkertest.AnyUID, podworker.HookSyncPod, podworkertest.Result{Terminal: true})
		f.Always("b", podworker.HookSyncPod, podworkertest.Result{})

		terminal, err := sync(&f, b)
		require.NoError(t, err)
		require.True(t, terminal, "AnyUID's queued result is used before any Always")
		_, err = sync(&f, b)
		require.NoError(t, err, "b's own Always beats AnyUID's Always")
		_, err = sync(&f, a)
		require.ErrorIs(t, err, errBoom, "a has no script of its own")
	})

	t.Run("a scripted panic panics and is recorded", func(t *testing.T) {
		var f podworkertest.FakeSyncer[struct{}]
		f.Next("a", podworker.HookSyncTerminatingPod, podworkertest.Result{Panic: "kaboom"})
		require.PanicsWithValue(t, "kaboom", func() { _ = f.SyncTerminatingPod(ctx, a, struct{}{}, 5, nil) })
		calls := f.Calls()
		require.Len(t, calls, 1)
		assert.True(t, calls[0].Panicked)
		assert.True(t, calls[0].Returned)
		assert.Equal(t, 0, f.InFlight(), "a panicking call is no longer in flight")
		assert.Equal(t, "kill(5)=panic", f.Trace("a"))
		require.NoError(t, f.SyncTerminatingPod(ctx, a, struct{}{}, 5, nil), "the panic was used up")
	})
}

func TestFakeSyncerGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f podworkertest.FakeSyncer[struct{}]
		pod := podworkertest.NewPod("a", "ns", "a")
		f.Next("a", podworker.HookSyncPod, podworkertest.Result{Terminal: true})
		g := f.Hold("a", podworker.HookSyncPod)

		type out struct {
			terminal bool
			err      error
		}
		res := make(chan out, 1)
		go func() {
			terminal, err := f.SyncPod(context.Background(), podworker.SyncPodCreate, pod, nil, struct{}{})
			res <- out{terminal, err}
		}()
		require.NoError(t, g.Wait(context.Background()))
		synctest.Wait()
		select {
		case <-res:
			t.Fatal("a held hook returned before Release")
		case <-g.Returned():
			t.Fatal("Returned closed before Release")
		default:
		}
		assert.Equal(t, 1, f.InFlight())
		calls := f.Calls()
		require.Len(t, calls, 1)
		assert.False(t, calls[0].Returned)
		assert.Equal(t, "sync:create", f.Trace("a"), "a running call shows no outcome")

		g.Release()
		g.Release() // idempotent
		o := <-res
		<-g.Returned()
		require.NoError(t, o.err)
		require.True(t, o.terminal, "the scripted result is returned after Release")
		assert.Equal(t, "sync:create=terminal", f.Trace("a"))

		// The gate was used up: the next call does not block.
		_, err := f.SyncPod(context.Background(), podworker.SyncPodSync, pod, nil, struct{}{})
		require.NoError(t, err)
		assert.Equal(t, 0, f.InFlight())
		assert.Equal(t, 1, f.MaxInFlight())
		assert.Equal(t, 1, f.MaxInFlightPerUID())
	})
}

func TestFakeSyncerGateHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f podworkertest.FakeSyncer[struct{}]
		pod := podworkertest.NewPod("a", "ns", "a")
		f.Next("a", podworker.HookSyncTerminatedPod, podworkertest.Result{Err: errBoom})
		g := f.Hold("a", podworker.HookSyncTerminatedPod)
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() { res <- f.SyncTerminatedPod(ctx, pod, struct{}{}) }()
		require.NoError(t, g.Wait(context.Background()))
		cancel()
		require.ErrorIs(t, <-res, context.Canceled)
		calls := f.Calls()
		require.Len(t, calls, 1)
		assert.True(t, calls[0].Canceled)
		assert.Equal(t, "terminated=canceled", f.Trace("a"))
		// The scripted error was not used by the cancelled call.
		require.ErrorIs(t, f.SyncTerminatedPod(context.Background(), pod, struct{}{}), errBoom)
	})
}

func TestFakeSyncerUncancelableGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f podworkertest.FakeSyncer[struct{}]
		pod := podworkertest.NewPod("a", "ns", "a")
		g := f.HoldUncancelable(podworkertest.AnyUID, podworker.HookSyncPod)
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() {
			_, err := f.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, struct{}{})
			res <- err
		}()
		require.NoError(t, g.Wait(context.Background()))
		cancel()
		synctest.Wait()
		select {
		case <-res:
			t.Fatal("an uncancelable hold returned when its ctx ended")
		default:
		}
		g.Release()
		require.NoError(t, <-res)
		assert.True(t, f.Calls()[0].Canceled, "the call still records that its ctx had ended")
	})
}

func TestFakeSyncerCountsOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f podworkertest.FakeSyncer[struct{}]
		a, b := podworkertest.NewPod("a", "ns", "a"), podworkertest.NewPod("b", "ns", "b")
		ga1 := f.Hold("a", podworker.HookSyncPod)
		ga2 := f.Hold("a", podworker.HookSyncPod)
		gb := f.Hold("b", podworker.HookSyncPod)
		for _, p := range []*v1.Pod{a, a, b} {
			go func() { _, _ = f.SyncPod(context.Background(), podworker.SyncPodSync, p, nil, struct{}{}) }()
		}
		for _, g := range []*podworkertest.Gate{ga1, ga2, gb} {
			require.NoError(t, g.Wait(context.Background()))
		}
		assert.Equal(t, 3, f.InFlight())
		for _, g := range []*podworkertest.Gate{ga1, ga2, gb} {
			g.Release()
			<-g.Returned()
		}
		assert.Equal(t, 0, f.InFlight())
		assert.Equal(t, 3, f.MaxInFlight())
		assert.Equal(t, 2, f.MaxInFlightPerUID(), "two calls of one UID overlapped")
	})
}

func TestFakeSyncerWaitForCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f podworkertest.FakeSyncer[struct{}]
		pod := podworkertest.NewPod("a", "ns", "a")
		ctx := context.Background()
		go func() {
			_, _ = f.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, struct{}{})
			_ = f.SyncTerminatingPod(ctx, pod, struct{}{}, 2, nil)
		}()
		calls, err := f.WaitForCalls(ctx, func(calls []podworkertest.Call[struct{}]) bool {
			return len(calls) == 2 && calls[1].Returned
		})
		require.NoError(t, err)
		require.Len(t, calls, 2)
		require.NoError(t, f.WaitForTrace(ctx, "a", "sync:create kill(2)"))

		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err = f.WaitForTrace(short, "a", "sync:create kill(2) terminated")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), `"sync:create kill(2)"`, "the error shows the trace it saw")
		_, err = f.WaitForCalls(short, func([]podworkertest.Call[struct{}]) bool { return false })
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestNewPods(t *testing.T) {
	p := podworkertest.NewPod("u", "ns", "n")
	assert.Equal(t, "u", string(p.UID))
	assert.Equal(t, "ns", p.Namespace)
	assert.Equal(t, "n", p.Name)
	require.NotNil(t, p.Spec.TerminationGracePeriodSeconds)
	assert.Equal(t, int64(30), *p.Spec.TerminationGracePeriodSeconds)
	assert.Empty(t, p.Annotations)

	s := podworkertest.NewStaticPod("s", "ns", "n")
	assert.Equal(t, "file", s.Annotations["kubernetes.io/config.source"])
}
