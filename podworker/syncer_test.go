package podworker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// plain hides every optional interface of a syncer: what a syncer that
// implements PodSyncer alone looks like to the engine.
type plain struct{ podworker.PodSyncer[struct{}] }

var (
	ctx0 = context.Background()
	rp0  = podworker.RuntimePod{UID: "rt", Namespace: "ns", Name: "rt"}
)

// Each nil func of PodSyncerFuncs does what is true of a syncer without it:
// nothing to start, nothing to stop only when nothing was started, nothing
// to release, and never a runtime pod reported stopped.
func TestPodSyncerFuncsNilFuncsReportOnlyWhatIsTrue(t *testing.T) {
	pod := mkPod("p")
	t.Run("no funcs: the syncer runs nothing", func(t *testing.T) {
		var f podworker.PodSyncerFuncs[struct{}]
		terminal, err := f.SyncPod(ctx0, podworker.SyncPodCreate, pod, nil, struct{}{})
		require.NoError(t, err)
		assert.False(t, terminal)
		assert.NoError(t, f.SyncTerminatingPod(ctx0, pod, struct{}{}, 1, nil), "nothing was started: nothing runs")
		assert.NoError(t, f.SyncTerminatedPod(ctx0, pod, struct{}{}), "nothing to release")
		err = f.SyncTerminatingRuntimePod(ctx0, rp0)
		require.ErrorIs(t, err, podworker.ErrNotImplemented, "the runtime showed the pod: nothing here stops it")
		assert.True(t, strings.HasPrefix(err.Error(), "podworker: "), err.Error())
		assert.Contains(t, err.Error(), "SyncTerminatingRuntimePodFunc")
	})
	t.Run("a SyncPodFunc and no SyncTerminatingPodFunc: nothing stops what it started", func(t *testing.T) {
		f := podworker.PodSyncerFuncs[struct{}]{SyncPodFunc: func(context.Context, podworker.UpdateType, *v1.Pod, *v1.Pod, struct{}) (bool, error) {
			return false, nil
		}}
		err := f.SyncTerminatingPod(ctx0, pod, struct{}{}, 1, nil)
		require.ErrorIs(t, err, podworker.ErrNotImplemented)
		assert.Contains(t, err.Error(), "SyncTerminatingPodFunc")
		assert.NoError(t, f.SyncTerminatedPod(ctx0, pod, struct{}{}))
	})
	t.Run("set funcs are called with the hook's arguments", func(t *testing.T) {
		var got []string
		f := podworker.PodSyncerFuncs[struct{}]{
			SyncPodFunc: func(_ context.Context, ut podworker.UpdateType, p, _ *v1.Pod, _ struct{}) (bool, error) {
				got = append(got, "sync "+ut.String()+" "+p.Name)
				return true, nil
			},
			SyncTerminatingPodFunc: func(_ context.Context, p *v1.Pod, _ struct{}, grace int64, _ func(*v1.PodStatus)) error {
				got = append(got, "kill "+p.Name)
				return errBoom
			},
			SyncTerminatedPodFunc: func(_ context.Context, p *v1.Pod, _ struct{}) error {
				got = append(got, "terminated "+p.Name)
				return nil
			},
			SyncTerminatingRuntimePodFunc: func(_ context.Context, p podworker.RuntimePod) error {
				got = append(got, "kill-runtime "+p.Name)
				return nil
			},
		}
		terminal, err := f.SyncPod(ctx0, podworker.SyncPodUpdate, pod, nil, struct{}{})
		assert.True(t, terminal)
		assert.NoError(t, err)
		assert.ErrorIs(t, f.SyncTerminatingPod(ctx0, pod, struct{}{}, 1, nil), errBoom)
		assert.NoError(t, f.SyncTerminatedPod(ctx0, pod, struct{}{}))
		assert.NoError(t, f.SyncTerminatingRuntimePod(ctx0, rp0))
		assert.Equal(t, []string{"sync update p", "kill p", "terminated p", "kill-runtime rt"}, got)
	})
}

// The engine does not report a pod stopped through a PodSyncerFuncs that
// cannot stop it: the kill fails with ErrNotImplemented and is retried.
func TestPodSyncerFuncsWithoutTerminatingFuncNeverReportsStopped(t *testing.T) {
	bubble(t, func(t *testing.T) {
		syncer := podworker.PodSyncerFuncs[struct{}]{SyncPodFunc: func(context.Context, podworker.UpdateType, *v1.Pod, *v1.Pod, struct{}) (bool, error) {
			return false, nil
		}}
		w, err := podworker.New[struct{}](syncer, podworker.Options[struct{}]{BackOff: time.Second})
		require.NoError(t, err)
		podworkertest.Start(t, w)
		pod := mkPod("p")
		require.NoError(t, w.UpdatePod(ctx0, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
		ch := make(chan struct{})
		require.NoError(t, w.UpdatePod(ctx0, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: pod, KillPodOptions: &podworker.KillPodOptions{CompletedCh: ch}}))
		time.Sleep(10 * time.Second)
		info, ok := w.Pod(pod.UID)
		require.True(t, ok)
		assert.Equal(t, podworker.StageTerminating, info.Stage)
		assert.ErrorIs(t, info.LastSyncError, podworker.ErrNotImplemented)
		assert.GreaterOrEqual(t, info.ConsecutiveFailures, 3, "it is retried")
		assert.True(t, w.CouldHaveRunningContainers(pod.UID))
		requireOpen(t, ch)
	})
}

// The package function reaches the optional hook, or says it is missing.
func TestSyncTerminatingRuntimePodFindsTheHook(t *testing.T) {
	f := podworkertest.NewFakeSyncer[struct{}]()
	require.NoError(t, podworker.SyncTerminatingRuntimePod[struct{}](ctx0, f, rp0))
	assert.Equal(t, "kill-runtime", f.Trace("rt"))

	err := podworker.SyncTerminatingRuntimePod[struct{}](ctx0, plain{f}, rp0)
	require.ErrorIs(t, err, podworker.ErrNotImplemented)
	assert.Contains(t, err.Error(), "RuntimePodSyncer")
	assert.Equal(t, "kill-runtime", f.Trace("rt"), "the hidden hook is not called")
}

// A nil func of a decoration is the inner syncer's hook, with the same
// arguments and results; a set one replaces it and may call it.
func TestDecorateDelegatesNilFuncs(t *testing.T) {
	pod, mirror := mkPod("p"), mkPod("p")
	statusFn := func(*v1.PodStatus) {}
	inner := podworkertest.NewFakeSyncer[struct{}]()
	inner.Next("p", podworker.HookSyncPod, podworkertest.Result{Terminal: true})
	inner.Next("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Err: errBoom})
	inner.Next("p", podworker.HookSyncTerminatedPod, podworkertest.Result{Err: errBoom})
	inner.Next("rt", podworker.HookSyncTerminatingRuntimePod, podworkertest.Result{Err: errBoom})
	d := podworker.Decorate[struct{}](inner, podworker.PodSyncerFuncs[struct{}]{})

	terminal, err := d.SyncPod(ctx0, podworker.SyncPodUpdate, pod, mirror, struct{}{})
	assert.True(t, terminal)
	assert.NoError(t, err)
	assert.ErrorIs(t, d.SyncTerminatingPod(ctx0, pod, struct{}{}, 7, statusFn), errBoom)
	assert.ErrorIs(t, d.SyncTerminatedPod(ctx0, pod, struct{}{}), errBoom)
	assert.ErrorIs(t, d.SyncTerminatingRuntimePod(ctx0, rp0), errBoom)

	calls := inner.Calls()
	require.Len(t, calls, 4)
	assert.Equal(t, podworker.SyncPodUpdate, calls[0].UpdateType)
	assert.Same(t, pod, calls[0].Pod)
	assert.Same(t, mirror, calls[0].MirrorPod)
	assert.Equal(t, int64(7), calls[1].GracePeriod)
	assert.NotNil(t, calls[1].PodStatusFunc)
	assert.Same(t, pod, calls[2].Pod)
	assert.Equal(t, rp0, calls[3].RuntimePod)

	// A set func serves its hook, here around the inner one.
	var order []string
	d = podworker.Decorate[struct{}](inner, podworker.PodSyncerFuncs[struct{}]{
		SyncTerminatedPodFunc: func(ctx context.Context, p *v1.Pod, st struct{}) error {
			order = append(order, "before")
			err := inner.SyncTerminatedPod(ctx, p, st)
			order = append(order, "after")
			return err
		},
	})
	require.NoError(t, d.SyncTerminatedPod(ctx0, pod, struct{}{}))
	assert.Equal(t, []string{"before", "after"}, order)
	assert.Equal(t, 2, inner.Count("p", podworker.HookSyncTerminatedPod))
}

// A decorator keeps the runtime hook of what it wraps: the inner hook when
// it has one, ErrNotImplemented when it has none, and its own func when set
// (which reaches the inner hook, or the same error, through the package
// function).
func TestDecorateKeepsTheRuntimeHook(t *testing.T) {
	inner := podworkertest.NewFakeSyncer[struct{}]()
	var d podworker.RuntimePodSyncer = podworker.Decorate[struct{}](inner, podworker.PodSyncerFuncs[struct{}]{})
	require.NoError(t, d.SyncTerminatingRuntimePod(ctx0, rp0))
	assert.Equal(t, 1, inner.Count("rt", podworker.HookSyncTerminatingRuntimePod), "the inner hook runs")

	d = podworker.Decorate[struct{}](plain{inner}, podworker.PodSyncerFuncs[struct{}]{})
	assert.ErrorIs(t, d.SyncTerminatingRuntimePod(ctx0, rp0), podworker.ErrNotImplemented)
	assert.Equal(t, 1, inner.Count("rt", podworker.HookSyncTerminatingRuntimePod), "the hidden hook is not called")

	for _, tc := range []struct {
		name    string
		plain   bool
		wantErr error
		calls   int
	}{
		{"over a runtime syncer", false, nil, 1},
		{"over a plain syncer", true, podworker.ErrNotImplemented, 0},
	} {
		t.Run("a func of its own "+tc.name, func(t *testing.T) {
			f := podworkertest.NewFakeSyncer[struct{}]()
			var inner podworker.PodSyncer[struct{}] = f
			if tc.plain {
				inner = plain{f}
			}
			var wrapped int
			d := podworker.Decorate(inner, podworker.PodSyncerFuncs[struct{}]{
				SyncTerminatingRuntimePodFunc: func(ctx context.Context, p podworker.RuntimePod) error {
					wrapped++
					return podworker.SyncTerminatingRuntimePod(ctx, inner, p)
				},
			})
			err := d.SyncTerminatingRuntimePod(ctx0, rp0)
			if tc.wantErr == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			assert.Equal(t, 1, wrapped)
			assert.Equal(t, tc.calls, f.Count("rt", podworker.HookSyncTerminatingRuntimePod))
		})
	}
}

// Decorators compose, outermost first, and keep the innermost syncer's
// runtime hook (or its absence) through every layer.
func TestDecoratorsCompose(t *testing.T) {
	var order []string
	layer := func(name string, inner podworker.PodSyncer[struct{}]) podworker.PodSyncer[struct{}] {
		return podworker.Decorate(inner, podworker.PodSyncerFuncs[struct{}]{
			SyncPodFunc: func(ctx context.Context, ut podworker.UpdateType, p, m *v1.Pod, st struct{}) (bool, error) {
				order = append(order, name)
				return inner.SyncPod(ctx, ut, p, m, st)
			},
		})
	}
	inner := podworkertest.NewFakeSyncer[struct{}]()
	s := layer("outer", layer("inner", inner))
	_, err := s.SyncPod(ctx0, podworker.SyncPodCreate, mkPod("p"), nil, struct{}{})
	require.NoError(t, err)
	assert.Equal(t, []string{"outer", "inner"}, order)
	assert.Equal(t, "sync:create", inner.Trace("p"))
	require.NoError(t, podworker.SyncTerminatingRuntimePod(ctx0, s, rp0))
	assert.Equal(t, 1, inner.Count("rt", podworker.HookSyncTerminatingRuntimePod))

	s = layer("outer", layer("inner", plain{inner}))
	assert.ErrorIs(t, podworker.SyncTerminatingRuntimePod(ctx0, s, rp0), podworker.ErrNotImplemented)
}

// A decoration of nothing has no hooks: each fails, and none panics.
func TestDecorateNilInnerFails(t *testing.T) {
	for name, d := range map[string]podworker.Decorated[struct{}]{
		"Decorate(nil)": podworker.Decorate[struct{}](nil, podworker.PodSyncerFuncs[struct{}]{}),
		"zero value":    {},
	} {
		t.Run(name, func(t *testing.T) {
			pod := mkPod("p")
			_, err := d.SyncPod(ctx0, podworker.SyncPodCreate, pod, nil, struct{}{})
			assert.ErrorIs(t, err, podworker.ErrNotImplemented)
			assert.ErrorIs(t, d.SyncTerminatingPod(ctx0, pod, struct{}{}, 1, nil), podworker.ErrNotImplemented)
			assert.ErrorIs(t, d.SyncTerminatedPod(ctx0, pod, struct{}{}), podworker.ErrNotImplemented)
			assert.ErrorIs(t, d.SyncTerminatingRuntimePod(ctx0, rp0), podworker.ErrNotImplemented)
		})
	}
}

// Through the engine: a decorator of a syncer with the runtime hook stops
// an orphan with the inner hook, and the kill completes. (Without the hook,
// the kill fails and is retried: TestRuntimeKillWithoutRuntimePodSyncer.)
func TestDecoratedRuntimeKillRunsTheInnerHook(t *testing.T) {
	bubble(t, func(t *testing.T) {
		inner := podworkertest.NewFakeSyncer[struct{}]()
		var decorated int
		d := podworker.Decorate[struct{}](inner, podworker.PodSyncerFuncs[struct{}]{
			SyncPodFunc: func(context.Context, podworker.UpdateType, *v1.Pod, *v1.Pod, struct{}) (bool, error) {
				decorated++
				return false, errors.New("not used: the pod is known only from the runtime")
			},
		})
		w, err := podworker.New[struct{}](d, podworker.Options[struct{}]{})
		require.NoError(t, err)
		podworkertest.Start(t, w)
		ch := make(chan struct{})
		require.NoError(t, w.UpdatePod(ctx0, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: &rp0, KillPodOptions: &podworker.KillPodOptions{CompletedCh: ch}}))
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatal("the orphan's kill did not complete")
		}
		assert.Equal(t, "kill-runtime", inner.Trace("rt"))
		assert.Zero(t, decorated)
		_, ok := w.Pod("rt")
		assert.False(t, ok, "the runtime pod's worker is gone")
		w.SyncKnownPods(nil)
		assert.False(t, w.CouldHaveRunningContainers("rt"))
	})
}
