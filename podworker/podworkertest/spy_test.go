package podworkertest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// realSyncer stands for an agent's own syncer: it keeps what it was asked
// to do, and its SyncPod reports the pod terminal on its second call.
type realSyncer struct {
	mu    sync.Mutex
	calls []string
	syncs map[types.UID]int
}

func (s *realSyncer) log(c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *realSyncer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func (s *realSyncer) funcs() podworker.PodSyncerFuncs[string] {
	return podworker.PodSyncerFuncs[string]{
		SyncPodFunc: func(_ context.Context, ut podworker.UpdateType, pod, _ *v1.Pod, status string) (bool, error) {
			s.log("SyncPod " + ut.String() + " " + status)
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.syncs == nil {
				s.syncs = map[types.UID]int{}
			}
			s.syncs[pod.UID]++
			return s.syncs[pod.UID] == 2, nil
		},
		SyncTerminatingPodFunc: func(_ context.Context, pod *v1.Pod, _ string, _ int64, _ func(*v1.PodStatus)) error {
			s.log("SyncTerminatingPod")
			return errors.New("real failure")
		},
	}
}

func TestSpySyncerDelegatesAndRecords(t *testing.T) {
	real := &realSyncer{}
	spy := podworkertest.NewSpySyncer[string](real.funcs())
	ctx := context.Background()
	pod := podworkertest.NewPod("u1", "ns", "a")

	terminal, err := spy.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, "st")
	require.NoError(t, err)
	assert.False(t, terminal)
	terminal, err = spy.SyncPod(ctx, podworker.SyncPodSync, pod, nil, "st")
	require.NoError(t, err)
	assert.True(t, terminal, "the delegate's result is returned")
	assert.EqualError(t, spy.SyncTerminatingPod(ctx, pod, "st", 30, nil), "real failure")
	require.NoError(t, spy.SyncTerminatedPod(ctx, pod, "st"), "a nil hook of the delegate succeeds")

	assert.Equal(t, []string{"SyncPod create st", "SyncPod sync st", "SyncTerminatingPod"}, real.seen())
	assert.Equal(t, "sync:create sync:sync=terminal kill(30)=error terminated", spy.Trace("u1"), "and recorded")
}

func TestSpySyncerScriptReplacesTheDelegate(t *testing.T) {
	real := &realSyncer{}
	spy := podworkertest.NewSpySyncer[string](real.funcs())
	spy.Next("u1", podworker.HookSyncPod, podworkertest.Result{Err: errBoom})
	pod := podworkertest.NewPod("u1", "ns", "a")

	_, err := spy.SyncPod(context.Background(), podworker.SyncPodCreate, pod, nil, "")
	require.ErrorIs(t, err, errBoom)
	assert.Empty(t, real.seen(), "a scripted call does not reach the delegate")
	_, err = spy.SyncPod(context.Background(), podworker.SyncPodSync, pod, nil, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"SyncPod sync "}, real.seen(), "the next one does")
}

func TestSpySyncerHoldsBeforeTheDelegate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		real := &realSyncer{}
		spy := podworkertest.NewSpySyncer[string](real.funcs())
		g := spy.Hold("u1", podworker.HookSyncPod)
		pod := podworkertest.NewPod("u1", "ns", "a")
		go func() { _, _ = spy.SyncPod(context.Background(), podworker.SyncPodCreate, pod, nil, "") }()
		synctest.Wait()
		require.NoError(t, g.Wait(t.Context()))
		assert.Empty(t, real.seen(), "a held call has not reached the delegate")
		g.Release()
		<-g.Returned()
		assert.Equal(t, []string{"SyncPod create "}, real.seen())
	})
}

func TestSpySyncerRecordsAndRepanicsADelegatePanic(t *testing.T) {
	spy := podworkertest.NewSpySyncer[struct{}](podworker.PodSyncerFuncs[struct{}]{
		SyncTerminatedPodFunc: func(context.Context, *v1.Pod, struct{}) error { panic("real panic") },
	})
	pod := podworkertest.NewPod("u1", "ns", "a")
	assert.PanicsWithValue(t, "real panic", func() { _ = spy.SyncTerminatedPod(context.Background(), pod, struct{}{}) })
	assert.Equal(t, "terminated=panic", spy.Trace("u1"))
}

func TestSpySyncerRuntimePodNeedsARuntimePodSyncer(t *testing.T) {
	rp := podworker.RuntimePod{UID: "u1", Namespace: "ns", Name: "a"}
	var plain struct{ podworker.PodSyncer[struct{}] }
	spy := podworkertest.NewSpySyncer[struct{}](plain)
	err := spy.SyncTerminatingRuntimePod(context.Background(), rp)
	require.ErrorIs(t, err, podworkertest.ErrNoRuntimePodSyncer)
	require.ErrorIs(t, err, podworker.ErrNotImplemented, "the engine retries it as it does for a syncer without the hook")

	// A delegate that has the method but not the hook is the same.
	spy = podworkertest.NewSpySyncer[struct{}](podworker.PodSyncerFuncs[struct{}]{})
	err = spy.SyncTerminatingRuntimePod(context.Background(), rp)
	require.ErrorIs(t, err, podworkertest.ErrNoRuntimePodSyncer)
	require.ErrorIs(t, err, podworker.ErrNotImplemented)
	assert.Contains(t, err.Error(), "SyncTerminatingRuntimePodFunc", "the delegate's own reason is kept")

	called := false
	spy = podworkertest.NewSpySyncer[struct{}](podworker.PodSyncerFuncs[struct{}]{
		SyncTerminatingRuntimePodFunc: func(_ context.Context, got podworker.RuntimePod) error {
			called = got == rp
			return nil
		},
	})
	require.NoError(t, spy.SyncTerminatingRuntimePod(context.Background(), rp))
	assert.True(t, called)
	assert.Equal(t, "kill-runtime", spy.Trace("u1"))
}

// The spy under the engine: the real syncer's terminal result drives the
// pod's life, and the trace shows it.
func TestSpySyncerUnderTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		real := &realSyncer{}
		spy := podworkertest.NewSpySyncer[string](real.funcs())
		spy.Next("u1", podworker.HookSyncTerminatingPod, podworkertest.Result{})
		w, err := podworker.New[string](spy, podworker.Options[string]{ResyncInterval: -1})
		require.NoError(t, err)
		podworkertest.Start(t, w)
		pod := podworkertest.NewPod("u1", "ns", "a")
		require.NoError(t, w.UpdatePod(t.Context(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
		synctest.Wait()
		require.True(t, w.Resync("u1"), "the pod is known")
		synctest.Wait()
		assert.Equal(t, "sync:create sync:sync=terminal kill(30) terminated", spy.Trace("u1"))
	})
}

// A nil delegate is no delegate: the spy is a plain fake.
func TestSpySyncerOfNilIsAFake(t *testing.T) {
	spy := podworkertest.NewSpySyncer[struct{}](nil)
	assert.Nil(t, spy.Delegate)
	ctx := context.Background()
	pod := podworkertest.NewPod("u1", "ns", "a")
	terminal, err := spy.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, struct{}{})
	require.NoError(t, err)
	assert.False(t, terminal)
	require.NoError(t, spy.SyncTerminatingPod(ctx, pod, struct{}{}, 30, nil))
	require.NoError(t, spy.SyncTerminatedPod(ctx, pod, struct{}{}))
	require.NoError(t, spy.SyncTerminatingRuntimePod(ctx, podworker.RuntimePod{UID: "u2", Namespace: "ns", Name: "b"}),
		"not ErrNoRuntimePodSyncer: there is no delegate to lack it")
	assert.Equal(t, "sync:create kill(30) terminated", spy.Trace("u1"))
	assert.Equal(t, "kill-runtime", spy.Trace("u2"))

	spy.Next("u1", podworker.HookSyncPod, podworkertest.Result{Err: errBoom})
	_, err = spy.SyncPod(ctx, podworker.SyncPodSync, pod, nil, struct{}{})
	require.ErrorIs(t, err, errBoom, "and scripts as a fake does")
}
