package podworker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// Bad input gets a clear error, never a panic or a silent loss, and leaves
// nothing behind (DESIGN, "What podkit adds" 5).
func TestUpdatePodRejectsBadInput(t *testing.T) {
	otherName := mkPod("p")
	otherName.Name = "other"
	otherNS := mkPod("p")
	otherNS.Namespace = "other"
	noUID := mkPod("p")
	noUID.UID = ""
	rp := &podworker.RuntimePod{UID: "p", Namespace: "ns", Name: "p"}
	for _, tc := range []struct {
		name string
		opts podworker.UpdatePodOptions
		// says is part of the error message.
		says string
	}{
		{"no pod and no running pod", podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate}, "neither Pod nor RunningPod"},
		{"a pod without UID", podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: noUID}, "no UID"},
		{"a running pod with a create", podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, RunningPod: rp}, "can only be killed"},
		{"a running pod with an update", podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, RunningPod: rp}, "can only be killed"},
		{"a running pod with a sync", podworker.UpdatePodOptions{UpdateType: podworker.SyncPodSync, RunningPod: rp}, "can only be killed"},
		{"a running pod without UID", podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: &podworker.RuntimePod{Namespace: "ns", Name: "p"}}, "no UID"},
		{"a running pod with a mirror pod", podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: rp, MirrorPod: mkPod("m")}, "mirror"},
		{"a mirror pod of another name", podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: mkPod("p"), MirrorPod: otherName}, "full name"},
		{"a mirror pod of another namespace", podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: mkPod("p"), MirrorPod: otherNS}, "full name"},
		{"an unknown update type", podworker.UpdatePodOptions{UpdateType: podworker.UpdateType(42), Pod: mkPod("p")}, "update type 42"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				r := startRig(t, podworker.Options[struct{}]{})
				ch := make(chan struct{})
				opts := tc.opts
				if opts.KillPodOptions == nil {
					opts.KillPodOptions = &podworker.KillPodOptions{}
				}
				opts.KillPodOptions.CompletedCh = ch
				var err error
				require.NotPanics(t, func() { err = r.w.UpdatePod(r.ctx, opts) })
				require.ErrorIs(t, err, podworker.ErrInvalidUpdate)
				assert.Contains(t, err.Error(), tc.says)
				assert.Contains(t, err.Error(), "podworker:")
				r.settle()
				assert.Empty(t, r.w.Pods(), "nothing recorded")
				assert.Empty(t, r.f.Calls())
				requireOpen(t, ch) // and its channel is left alone
			})
		})
	}
}

// A bad update for a pod the engine knows does not disturb it.
func TestUpdatePodBadInputLeavesKnownPodAlone(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		p := mkPod("p")
		r.started(p)
		before := r.info("p")
		other := mkPod("p")
		other.Name = "other"
		err := r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: p, MirrorPod: other})
		require.ErrorIs(t, err, podworker.ErrInvalidUpdate)
		r.settle()
		assert.Equal(t, before, r.info("p"))
		assert.Equal(t, "sync:create", r.trace("p"))
	})
}

func TestKillPodRejectsBadInput(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		require.ErrorIs(t, r.w.KillPod(r.ctx, nil, podworker.KillPodOptions{}), podworker.ErrInvalidUpdate)
		noUID := mkPod("p")
		noUID.UID = ""
		require.ErrorIs(t, r.w.KillPod(r.ctx, noUID, podworker.KillPodOptions{}), podworker.ErrInvalidUpdate)
		r.settle()
		assert.Empty(t, r.w.Pods())
	})
}

func TestUpdatePodWithEndedContext(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, r.w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("p")}), context.Canceled)
		require.ErrorIs(t, r.w.KillPod(ctx, mkPod("q"), podworker.KillPodOptions{}), context.Canceled)
		r.settle()
		assert.Empty(t, r.w.Pods())

		// UpdatePod's ctx is not retained: hooks do not see it end.
		ctx, cancel = context.WithCancel(context.Background())
		r.update(podworker.SyncPodCreate, mkPod("p"))
		require.NoError(t, r.w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: mkPod("p")}))
		cancel()
		r.settle()
		for _, c := range r.f.CallsFor("p") {
			assert.False(t, c.Canceled)
		}
	})
}

func TestNewValidatesOptions(t *testing.T) {
	f := podworkertest.NewFakeSyncer[struct{}]()
	for _, tc := range []struct {
		name string
		opts podworker.Options[struct{}]
		says string
	}{
		{"negative MaxConcurrentSyncs", podworker.Options[struct{}]{MaxConcurrentSyncs: -1}, "MaxConcurrentSyncs"},
		{"negative BackOff", podworker.Options[struct{}]{BackOff: -time.Second}, "BackOff"},
		{"negative MaxBackOff", podworker.Options[struct{}]{MaxBackOff: -time.Second}, "MaxBackOff"},
		{"MaxBackOff below BackOff", podworker.Options[struct{}]{BackOff: time.Minute, MaxBackOff: time.Second}, "MaxBackOff"},
		// Huge delays would overflow the engine's clock arithmetic and make
		// the pod's hooks run in a busy loop.
		{"huge ResyncInterval", podworker.Options[struct{}]{ResyncInterval: math.MaxInt64}, "ResyncInterval is"},
		{"huge BackOff", podworker.Options[struct{}]{BackOff: math.MaxInt64, MaxBackOff: math.MaxInt64}, "BackOff is"},
		{"huge MaxBackOff", podworker.Options[struct{}]{MaxBackOff: math.MaxInt64}, "MaxBackOff is"},
		{"huge SlowHookWarning", podworker.Options[struct{}]{SlowHookWarning: math.MaxInt64}, "SlowHookWarning is"},
		{"ResyncInterval just above MaxDelay", podworker.Options[struct{}]{ResyncInterval: podworker.MaxDelay + 1}, "MaxDelay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := podworker.New[struct{}](f, tc.opts)
			require.Error(t, err)
			assert.Nil(t, w)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
	t.Run("no syncer", func(t *testing.T) {
		w, err := podworker.New[struct{}](nil, podworker.Options[struct{}]{})
		require.Error(t, err)
		assert.Nil(t, w)
	})
	t.Run("the zero value is valid", func(t *testing.T) {
		w, err := podworker.New[struct{}](f, podworker.Options[struct{}]{})
		require.NoError(t, err)
		require.NotNil(t, w)
	})
	t.Run("MaxDelay itself is valid everywhere", func(t *testing.T) {
		_, err := podworker.New[struct{}](f, podworker.Options[struct{}]{ResyncInterval: podworker.MaxDelay, BackOff: podworker.MaxDelay, MaxBackOff: podworker.MaxDelay, SlowHookWarning: podworker.MaxDelay})
		require.NoError(t, err)
	})
	t.Run("a BackOff above the default MaxBackOff raises it", func(t *testing.T) {
		_, err := podworker.New[struct{}](f, podworker.Options[struct{}]{BackOff: time.Hour})
		require.NoError(t, err)
	})
}

func TestRetryAfterNilIsNil(t *testing.T) {
	assert.NoError(t, podworker.RetryAfter(nil, time.Second))
	err := podworker.RetryAfter(errBoom, time.Second)
	assert.ErrorIs(t, err, errBoom)
	assert.Equal(t, errBoom.Error(), err.Error())
}

// Without RuntimePodSyncer, a runtime-only kill fails with an error that
// says so, and is retried (the pod may still have containers). A syncer
// whose runtime hook says it is not implemented (ErrNotImplemented) takes
// the same path: a PodSyncerFuncs without the func, a Decorate of a syncer
// without the hook.
func TestRuntimeKillWithoutRuntimePodSyncer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		syncer func(f *podworkertest.FakeSyncer[struct{}]) podworker.PodSyncer[struct{}]
	}{
		{"no RuntimePodSyncer", func(f *podworkertest.FakeSyncer[struct{}]) podworker.PodSyncer[struct{}] {
			// Hide SyncTerminatingRuntimePod behind the plain interface.
			return struct{ podworker.PodSyncer[struct{}] }{f}
		}},
		{"PodSyncerFuncs without the func", func(f *podworkertest.FakeSyncer[struct{}]) podworker.PodSyncer[struct{}] {
			return podworker.PodSyncerFuncs[struct{}]{SyncPodFunc: f.SyncPod, SyncTerminatingPodFunc: f.SyncTerminatingPod, SyncTerminatedPodFunc: f.SyncTerminatedPod}
		}},
		{"a decorator of a syncer without the hook", func(f *podworkertest.FakeSyncer[struct{}]) podworker.PodSyncer[struct{}] {
			return podworker.Decorate[struct{}](struct{ podworker.PodSyncer[struct{}] }{f}, podworker.PodSyncerFuncs[struct{}]{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				var logs logSink
				f := podworkertest.NewFakeSyncer[struct{}]()
				w, err := podworker.New(tc.syncer(f), podworker.Options[struct{}]{Logger: logs.logger(), BackOff: time.Second})
				require.NoError(t, err)
				podworkertest.Start(t, w)
				ch := make(chan struct{})
				require.NoError(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: &podworker.RuntimePod{UID: "rt", Namespace: "ns", Name: "rt"}, KillPodOptions: &podworker.KillPodOptions{CompletedCh: ch}}))
				time.Sleep(10 * time.Second)
				assert.NotEmpty(t, logs.find("RuntimePodSyncer"), "the error names what is missing")
				assert.GreaterOrEqual(t, len(logs.all("RuntimePodSyncer")), 3, "and it is retried")
				info, ok := w.Pod("rt")
				require.True(t, ok)
				assert.Equal(t, podworker.StageTerminating, info.Stage)
				assert.ErrorIs(t, info.LastSyncError, podworker.ErrNotImplemented)
				assert.GreaterOrEqual(t, info.ConsecutiveFailures, 3)
				assert.False(t, info.NextSyncTime.IsZero(), "a retry is scheduled")
				assert.True(t, w.CouldHaveRunningContainers("rt"))
				requireOpen(t, ch)
				assert.Empty(t, f.Calls())
			})
		})
	}
}

// recordingStatus is a StatusSource that records what it is asked and can
// fail or block.
type recordingStatus struct {
	asked chan statusAsk
	err   error
	block chan struct{}
}

type statusAsk struct {
	uid       types.UID
	newerThan time.Time
}

func (s *recordingStatus) PodStatus(ctx context.Context, uid types.UID, newerThan time.Time) (string, error) {
	s.asked <- statusAsk{uid, newerThan}
	if s.block != nil && uid == "slow" {
		select {
		case <-s.block:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if s.err != nil && uid == "bad" {
		return "", s.err
	}
	return "status of " + string(uid), nil
}

func TestStatusSource(t *testing.T) {
	bubble(t, func(t *testing.T) {
		src := &recordingStatus{asked: make(chan statusAsk, 100), err: errBoom, block: make(chan struct{})}
		f := podworkertest.NewFakeSyncer[string]()
		w, err := podworker.New[string](f, podworker.Options[string]{Status: src, ResyncInterval: 10 * time.Second, BackOff: time.Second})
		require.NoError(t, err)
		podworkertest.Start(t, w)
		ctx := context.Background()

		// Hooks get the status; the first read asks for any status, later
		// ones for one newer than the previous hook's end.
		t0 := time.Now()
		require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("ok")}))
		time.Sleep(15 * time.Second) // the resync is due within [10s, 15s)
		calls := f.CallsFor("ok")
		require.Len(t, calls, 2)
		assert.Equal(t, "status of ok", calls[0].Status)
		first, second := <-src.asked, <-src.asked
		assert.True(t, first.newerThan.IsZero())
		assert.Equal(t, t0, second.newerThan)

		// A status error fails the sync, which is retried; the hook is not
		// called without a status.
		require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("bad")}))
		time.Sleep(4 * time.Second)
		assert.Empty(t, f.CallsFor("bad"))
		var asks int
		for len(src.asked) > 0 {
			if a := <-src.asked; a.uid == "bad" {
				asks++
			}
		}
		assert.GreaterOrEqual(t, asks, 2, "retried")

		// A status source that blocks holds up only its own pod, and
		// termination cancels the wait.
		require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("slow")}))
		require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("quick")}))
		synctest.Wait()
		assert.Empty(t, f.CallsFor("slow"))
		assert.Equal(t, "sync:create", f.Trace("quick"))
		close(src.block)
		synctest.Wait()
		assert.Equal(t, "sync:create", f.Trace("slow"))
	})
}

// Each hook's ctx carries the engine's logger, with the pod's UID and name.
func TestHookContextCarriesLogger(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var logs logSink
		syncer := podworker.PodSyncerFuncs[struct{}]{
			SyncPodFunc: func(ctx context.Context, _ podworker.UpdateType, pod *v1.Pod, _ *v1.Pod, _ struct{}) (bool, error) {
				logr.FromContextOrDiscard(ctx).Info("hello from the hook")
				return false, nil
			},
		}
		w, err := podworker.New[struct{}](syncer, podworker.Options[struct{}]{Logger: logs.logger(), ResyncInterval: -1})
		require.NoError(t, err)
		podworkertest.Start(t, w)
		require.NoError(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("p")}))
		synctest.Wait()
		line := logs.find("hello from the hook")
		require.NotEmpty(t, line)
		assert.Contains(t, line, `"podUID"="p"`)
		assert.Contains(t, line, `"pod"="p_ns"`)
	})
}

type runKey struct{}

// A context made after a cancellation (the first one was listened to, so
// it was cancelled, not kept) carries Run's values and the logger too.
func TestEveryHookContextCarriesRunsValues(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var logs logSink
		var mu sync.Mutex
		var seen []context.Context
		record := func(ctx context.Context, hook string) {
			mu.Lock()
			seen = append(seen, ctx)
			mu.Unlock()
			assert.Equal(t, "run's", ctx.Value(runKey{}), "%s's ctx has Run's values", hook)
			logr.FromContextOrDiscard(ctx).Info("hello from " + hook)
		}
		syncer := podworker.PodSyncerFuncs[struct{}]{
			SyncPodFunc: func(ctx context.Context, _ podworker.UpdateType, _ *v1.Pod, _ *v1.Pod, _ struct{}) (bool, error) {
				record(ctx, "SyncPod")
				<-ctx.Done()
				return false, ctx.Err()
			},
			SyncTerminatingPodFunc: func(ctx context.Context, _ *v1.Pod, _ struct{}, _ int64, _ func(*v1.PodStatus)) error {
				record(ctx, "SyncTerminatingPod")
				return nil
			},
		}
		w, err := podworker.New[struct{}](syncer, podworker.Options[struct{}]{Logger: logs.logger(), ResyncInterval: -1})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), runKey{}, "run's"))
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		defer func() {
			cancel()
			require.NoError(t, <-done)
		}()
		require.NoError(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("p")}))
		synctest.Wait()
		require.NoError(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: mkPod("p")}))
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, seen, 2)
		assert.NotSame(t, seen[0], seen[1], "the second hook got a new context")
		for _, hook := range []string{"SyncPod", "SyncTerminatingPod"} {
			line := logs.find("hello from " + hook)
			require.NotEmpty(t, line, hook)
			assert.Contains(t, line, `"podUID"="p"`)
			assert.Contains(t, line, `"pod"="p_ns"`)
		}
	})
}

// A hook error is logged with the pod; a cancellation is not an error worth
// logging.
func TestHookErrorsAreLogged(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var logs logSink
		r := newRig(t, podworker.Options[struct{}]{Logger: logs.logger()})
		r.start()
		r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Err: fmt.Errorf("image pull: %w", errBoom)})
		r.update(podworker.SyncPodCreate, mkPod("p"))
		r.settle()
		line := logs.find("image pull")
		require.NotEmpty(t, line)
		assert.Contains(t, line, `"podUID"="p"`)

		r.f.Next("q", podworker.HookSyncPod, podworkertest.Result{Err: context.Canceled})
		r.update(podworker.SyncPodCreate, mkPod("q"))
		r.settle()
		for _, l := range logs.all(`"podUID"="q"`) {
			assert.NotContains(t, l, "context canceled")
		}
		assert.True(t, errors.Is(r.f.CallsFor("q")[0].Err, context.Canceled))
	})
}
