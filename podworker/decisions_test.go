package podworker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// One test per decision of SPEC's table, where podkit differs from the
// kubelet on purpose. D5 (mirror pod AlreadyExists) and D6 (pod manager
// removal and UID translations) are not the engine's: the mirror and
// podmanager packages test them.

var errBoom = errors.New("boom")

// started creates pod and lets its first SyncPod run.
func (r *rig) started(pod *v1.Pod) {
	r.t.Helper()
	r.update(podworker.SyncPodCreate, pod)
	r.settle()
	require.Equal(r.t, podworker.StageSyncing, r.info(pod.UID).Stage)
}

func TestDecisionD1_GraceOnlyShortens(t *testing.T) {
	t.Run("a force delete followed by a longer eviction override keeps 1 and cancels nothing", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			r.update(podworker.SyncPodUpdate, deleted(p, i64(0)))
			r.entered(g)
			require.Equal(t, int64(1), r.info("p").GracePeriod, "0 requested means 1")

			r.kill(p, &podworker.KillPodOptions{Evict: true, PodTerminationGracePeriodSecondsOverride: i64(5)})
			r.settle()
			requireOpen(t, g.Returned()) // the running hook was not cancelled
			assert.Equal(t, int64(1), r.info("p").GracePeriod)
			g.Release()
			r.settle()
			assert.Equal(t, "sync:create kill(1) terminated", r.trace("p"))
			assert.False(t, r.f.CallsFor("p")[1].Canceled)
		})
	})
	t.Run("a shorter grace cancels the running hook, which reruns with it", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			r.kill(p, nil)
			r.entered(g)
			r.kill(p, &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(10)})
			r.settle()
			assert.Equal(t, "sync:create kill(30)=canceled kill(10) terminated", r.trace("p"))
			assert.Equal(t, int64(10), r.info("p").GracePeriod)
		})
	})
	t.Run("a longer request later is ignored", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			r.kill(p, &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(10)})
			r.entered(g)
			r.update(podworker.SyncPodUpdate, deleted(p, i64(20)))
			r.kill(p, &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(15)})
			r.settle()
			requireOpen(t, g.Returned())
			assert.Equal(t, int64(10), r.info("p").GracePeriod)
			g.Release()
			r.settle()
			assert.Equal(t, "sync:create kill(10) terminated", r.trace("p"))
		})
	})
	t.Run("an override of 0 means 1", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			r.kill(p, &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(0)})
			r.settle()
			assert.Equal(t, "sync:create kill(1) terminated", r.trace("p"))
		})
	})
	t.Run("the first request may be longer than the spec's", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			r.kill(p, &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(45)})
			r.settle()
			assert.Equal(t, "sync:create kill(45) terminated", r.trace("p"))
		})
	})
}

func TestDecisionD2_CompletedChClosedWhenNothingCanRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		// run sends the update carrying ch and checks when it closes.
		run func(t *testing.T, r *rig, ch chan struct{})
	}{{
		name: "a kill closes it once SyncTerminatingPod succeeded, not before",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			p := mkPod("p")
			r.started(p)
			gTerm := r.hold("p", podworker.HookSyncTerminatingPod)
			gDone := r.hold("p", podworker.HookSyncTerminatedPod)
			r.kill(p, &podworker.KillPodOptions{CompletedCh: ch})
			r.entered(gTerm)
			requireOpen(t, ch)
			gTerm.Release()
			r.entered(gDone)
			requireClosed(t, ch) // before cleanup is done
			gDone.Release()
		},
	}, {
		name: "a failing SyncTerminatingPod keeps it open until it succeeds",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			p := mkPod("p")
			r.started(p)
			r.f.Next("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Err: errBoom}, podworkertest.Result{Panic: "kaboom"})
			r.kill(p, &podworker.KillPodOptions{CompletedCh: ch})
			r.settle()
			requireOpen(t, ch)
			time.Sleep(time.Minute) // the retries succeed
			r.settle()
			requireClosed(t, ch)
			assert.Equal(t, "sync:create kill(30)=error kill(30)=panic kill(30) terminated", r.trace("p"))
		},
	}, {
		name: "a pod never seen before closes it after its termination",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			r.kill(mkPod("p"), &podworker.KillPodOptions{CompletedCh: ch})
			r.entered(g)
			requireOpen(t, ch)
			g.Release()
			r.settle()
			requireClosed(t, ch)
		},
	}, {
		name: "an already terminated pod closes it at once",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatedPod)
			r.kill(p, nil)
			r.entered(g)
			r.kill(p, &podworker.KillPodOptions{CompletedCh: ch})
			requireClosed(t, ch)
			g.Release()
		},
	}, {
		name: "an already finished pod closes it at once",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			p := mkPod("p")
			r.started(p)
			r.kill(p, nil)
			r.settle()
			r.kill(p, &podworker.KillPodOptions{CompletedCh: ch})
			requireClosed(t, ch)
		},
	}, {
		name: "a static pod that never started closes it when it is cleaned up",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			r.started(mkStatic("holder", "web"))
			r.update(podworker.SyncPodCreate, mkStatic("p", "web"))
			r.kill(mkStatic("p", "web"), &podworker.KillPodOptions{CompletedCh: ch})
			r.settle()
			requireClosed(t, ch)
			assert.Empty(t, r.trace("p"))
		},
	}, {
		name: "a runtime-only pod closes it once its containers are stopped",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			g := r.hold("p", podworker.HookSyncTerminatingRuntimePod)
			r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: &podworker.RuntimePod{UID: "p", Namespace: "ns", Name: "p"}, KillPodOptions: &podworker.KillPodOptions{CompletedCh: ch}})
			r.entered(g)
			requireOpen(t, ch)
			g.Release()
			r.settle()
			requireClosed(t, ch)
		},
	}, {
		name: "an orphan forgotten before it started closes it",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			r.stop()
			r2 := newRig(t, podworker.Options[struct{}]{})
			r2.kill(mkPod("p"), &podworker.KillPodOptions{CompletedCh: ch})
			requireOpen(t, ch)
			r2.w.SyncKnownPods(nil)
			requireClosed(t, ch)
			r2.absent("p")
		},
	}, {
		name: "a non-kill update keeps it until the pod is terminated",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			p := mkPod("p")
			r.started(p)
			r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: p, KillPodOptions: &podworker.KillPodOptions{CompletedCh: ch}})
			r.settle()
			requireOpen(t, ch) // the pod still runs
			r.kill(p, nil)
			r.settle()
			requireClosed(t, ch)
		},
	}, {
		name: "a create that asks for a restart keeps it until the termination is done",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			r.kill(p, nil)
			r.entered(g)
			r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: p, KillPodOptions: &podworker.KillPodOptions{CompletedCh: ch}})
			requireOpen(t, ch)
			g.Release()
			r.settle()
			requireClosed(t, ch)
		},
	}, {
		name: "it stays open when the engine stops before the containers are stopped",
		run: func(t *testing.T, r *rig, ch chan struct{}) {
			p := mkPod("p")
			r.started(p)
			r.f.Always("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Err: errBoom})
			r.kill(p, &podworker.KillPodOptions{CompletedCh: ch})
			r.settle()
			r.stop()
			requireOpen(t, ch)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				r := startRig(t, podworker.Options[struct{}]{})
				ch := make(chan struct{})
				tc.run(t, r, ch)
				r.settle()
			})
		})
	}
}

func TestDecisionD3_LaterDeletionAndEvictionCount(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		p := mkPod("p")
		r.started(p)
		gTerm := r.hold("p", podworker.HookSyncTerminatingPod)
		gDone := r.hold("p", podworker.HookSyncTerminatedPod)
		r.kill(p, nil) // a plain kill starts the termination
		r.entered(gTerm)
		info := r.info("p")
		assert.False(t, info.Deleted)
		assert.False(t, info.Evicted)
		assert.False(t, r.w.ShouldPodContentBeRemoved("p"))

		// A deletion arrives while terminating: the pod is now deleted, so
		// its content goes once it is terminated (not yet).
		r.update(podworker.SyncPodUpdate, deleted(p, nil))
		assert.True(t, r.info("p").Deleted)
		assert.False(t, r.w.ShouldPodContentBeRemoved("p"))

		// An eviction arrives: content may go at once.
		r.kill(p, &podworker.KillPodOptions{Evict: true})
		assert.True(t, r.info("p").Evicted)
		assert.True(t, r.w.ShouldPodContentBeRemoved("p"))
		gTerm.Release()
		r.entered(gDone)
		gDone.Release()
		r.settle()
		info = r.info("p")
		assert.True(t, info.Finished)
		assert.True(t, info.Deleted)
		assert.True(t, info.Evicted)
	})
	t.Run("a deletion after the pod terminated", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Terminal: true})
			r.update(podworker.SyncPodUpdate, p)
			r.settle()
			require.True(t, r.info("p").Finished)
			require.False(t, r.w.ShouldPodContentBeRemoved("p"), "finished on its own and still desired: content stays")
			r.update(podworker.SyncPodUpdate, deleted(p, nil))
			assert.True(t, r.info("p").Deleted)
			assert.True(t, r.w.ShouldPodContentBeRemoved("p"))
		})
	})
}

func TestDecisionD4_FirstSeenTerminalPodNeedsPositiveStatus(t *testing.T) {
	succeeded := inPhase(mkPod("p"), v1.PodSucceeded)
	for _, tc := range []struct {
		name   string
		status podworker.StatusSource[stoppedStatus]
		// seenRunning: the pod was synced running before it turned terminal.
		seenRunning bool
		trace       string
	}{
		{name: "no status source: the safe path", trace: "kill(30) terminated"},
		{name: "a status source that cannot tell", status: statusOnly{}, trace: "kill(30) terminated"},
		{name: "the status shows something running", status: stoppedSource{stopped: false}, trace: "kill(30) terminated"},
		{name: "the status shows nothing running", status: stoppedSource{stopped: true}, trace: "terminated"},
		{name: "a pod seen running before is always stopped", status: stoppedSource{stopped: true}, seenRunning: true, trace: "sync:create kill(30) terminated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				f := podworkertest.NewFakeSyncer[stoppedStatus]()
				w, err := podworker.New[stoppedStatus](f, podworker.Options[stoppedStatus]{Status: tc.status, ResyncInterval: -1})
				require.NoError(t, err)
				ctx := context.Background()
				if tc.seenRunning {
					podworkertest.Start(t, w)
					require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("p")}))
					synctest.Wait()
					require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: succeeded}))
				} else {
					require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: succeeded}))
					// Until the worker has looked, the pod may still run.
					assert.True(t, w.CouldHaveRunningContainers("p"))
					assert.False(t, w.IsPodKnownTerminated("p"))
					podworkertest.Start(t, w)
				}
				synctest.Wait()
				assert.Equal(t, tc.trace, f.Trace("p"))
				info, ok := w.Pod("p")
				require.True(t, ok)
				assert.True(t, info.Finished)
			})
		})
	}
}

// statusOnly is a StatusSource that is not a StoppedChecker.
type statusOnly struct{}

func (statusOnly) PodStatus(context.Context, types.UID, time.Time) (stoppedStatus, error) {
	return stoppedStatus{stopped: true}, nil
}

func TestDecisionD7_NextStaticPodStartsByItself(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		r.started(mkStatic("a", "web"))
		r.update(podworker.SyncPodCreate, mkStatic("b", "web"))
		r.settle()
		require.Empty(t, r.trace("b"))
		r.kill(mkStatic("a", "web"), nil)
		r.settle() // no further UpdatePod for b
		assert.Equal(t, "sync:create kill(30) terminated", r.trace("a"))
		assert.Equal(t, "sync:create", r.trace("b"))
		assert.Equal(t, podworker.StageSyncing, r.info("b").Stage)
	})
}

// gaps returns the time between successive calls.
func gaps[T any](calls []podworkertest.Call[T]) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(calls); i++ {
		out = append(out, calls[i].Time.Sub(calls[i-1].Time))
	}
	return out
}

func between(t *testing.T, d, lo, hi time.Duration, msg string) {
	t.Helper()
	assert.GreaterOrEqual(t, d, lo, msg)
	assert.Less(t, d, hi, msg)
}

// ownRetry is a syncer's own error type that says when to retry.
type ownRetry time.Duration

func (d ownRetry) Error() string             { return "not yet" }
func (d ownRetry) RetryDelay() time.Duration { return time.Duration(d) }

var _ podworker.RetryDelayer = ownRetry(0)

func TestDecisionD8_EngineRetriesOnItsOwn(t *testing.T) {
	t.Run("failures back off exponentially, jittered, capped, and reset on success", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{BackOff: time.Second, MaxBackOff: 8 * time.Second})
			p := mkPod("p")
			r.f.Always("p", podworker.HookSyncPod, podworkertest.Result{Err: errBoom})
			r.update(podworker.SyncPodCreate, p)
			time.Sleep(80 * time.Second)
			calls := r.f.CallsFor("p")
			require.GreaterOrEqual(t, len(calls), 7)
			for i, g := range gaps(calls) {
				base := min(time.Second<<i, 8*time.Second)
				between(t, g, base, base+base/2, fmt.Sprintf("retry %d", i+1))
			}
			for _, c := range calls[1:] {
				assert.Equal(t, podworker.SyncPodSync, c.UpdateType, "retries replay the update as a sync")
				assert.Same(t, p, c.Pod)
			}
			assert.Equal(t, podworker.StageSyncing, r.info("p").Stage)

			// The next retry succeeds; resyncs are off, so the pod goes idle.
			r.f.Always("p", podworker.HookSyncPod, podworkertest.Result{})
			time.Sleep(20 * time.Second)
			n := len(r.f.CallsFor("p"))
			require.False(t, r.f.CallsFor("p")[n-1].Err != nil)
			time.Sleep(time.Hour)
			require.Len(t, r.f.CallsFor("p"), n, "idle after success")

			// A new failure starts again from BackOff.
			r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Err: errBoom})
			r.update(podworker.SyncPodUpdate, p)
			time.Sleep(5 * time.Second)
			calls = r.f.CallsFor("p")
			require.Len(t, calls, n+2)
			between(t, calls[n+1].Time.Sub(calls[n].Time), time.Second, 1500*time.Millisecond, "backoff reset by the success")
		})
	})
	t.Run("success resyncs after the interval, jittered, with the last pod", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{ResyncInterval: 10 * time.Second})
			p := mkStatic("p", "web")
			m := mkPod("m")
			m.Name = "web"
			r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: p, MirrorPod: m})
			time.Sleep(time.Minute)
			calls := r.f.CallsFor("p")
			require.GreaterOrEqual(t, len(calls), 5)
			require.LessOrEqual(t, len(calls), 7)
			for i, g := range gaps(calls) {
				between(t, g, 10*time.Second, 15*time.Second, fmt.Sprintf("resync %d", i+1))
			}
			for _, c := range calls[1:] {
				assert.Equal(t, podworker.SyncPodSync, c.UpdateType)
				assert.Same(t, p, c.Pod)
				assert.Same(t, m, c.MirrorPod, "the mirror pod is kept")
			}
		})
	})
	t.Run("a negative ResyncInterval disables resyncs", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{ResyncInterval: -1})
			r.update(podworker.SyncPodCreate, mkPod("p"))
			time.Sleep(24 * time.Hour)
			assert.Equal(t, "sync:create", r.trace("p"))
		})
	})
	t.Run("the default resync is one minute", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			f := podworkertest.NewFakeSyncer[struct{}]()
			w, err := podworker.New[struct{}](f, podworker.Options[struct{}]{})
			require.NoError(t, err)
			podworkertest.Start(t, w)
			require.NoError(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("p")}))
			time.Sleep(90 * time.Second)
			calls := f.CallsFor("p")
			require.Len(t, calls, 2)
			between(t, calls[1].Time.Sub(calls[0].Time), time.Minute, 90*time.Second, "default resync")
		})
	})
	t.Run("an error may say when to retry", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			err  error
			lo   time.Duration
			hi   time.Duration // exclusive; lo+1ns for an exact delay
		}{
			{"RetryAfter is exact", podworker.RetryAfter(errBoom, 7*time.Second), 7 * time.Second, 7*time.Second + 1},
			{"RetryAfter below zero means at once", podworker.RetryAfter(errBoom, -time.Second), 0, 1},
			{"RetryAfter is clamped to MaxBackOff", podworker.RetryAfter(errBoom, time.Hour), 30 * time.Second, 30*time.Second + 1},
			{"the earliest of joined errors wins", errors.Join(podworker.RetryAfter(errBoom, 5*time.Second), errBoom, podworker.RetryAfter(errBoom, 3*time.Second)), 3 * time.Second, 3*time.Second + 1},
			{"a wrapped RetryAfter counts", fmt.Errorf("pulling: %w", podworker.RetryAfter(errBoom, 4*time.Second)), 4 * time.Second, 4*time.Second + 1},
			{"an apimachinery Aggregate is searched", utilerrors.NewAggregate([]error{errBoom, podworker.RetryAfter(errBoom, 6*time.Second)}), 6 * time.Second, 6*time.Second + 1},
			{"a nested Aggregate is searched", fmt.Errorf("sync: %w", utilerrors.NewAggregate([]error{errBoom, utilerrors.NewAggregate([]error{podworker.RetryAfter(errBoom, 5*time.Second)})})), 5 * time.Second, 5*time.Second + 1},
			{"an Aggregate inside errors.Join is searched", errors.Join(errBoom, utilerrors.NewAggregate([]error{podworker.RetryAfter(errBoom, 4*time.Second), podworker.RetryAfter(errBoom, 9*time.Second)})), 4 * time.Second, 4*time.Second + 1},
			{"a syncer's own RetryDelayer counts", fmt.Errorf("pull: %w", ownRetry(8*time.Second)), 8 * time.Second, 8*time.Second + 1},
			{"a plain error backs off", errBoom, 2 * time.Second, 3 * time.Second},
		} {
			t.Run(tc.name, func(t *testing.T) {
				bubble(t, func(t *testing.T) {
					r := startRig(t, podworker.Options[struct{}]{BackOff: 2 * time.Second, MaxBackOff: 30 * time.Second})
					r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Err: tc.err})
					r.update(podworker.SyncPodCreate, mkPod("p"))
					time.Sleep(time.Minute)
					calls := r.f.CallsFor("p")
					require.Len(t, calls, 2)
					between(t, calls[1].Time.Sub(calls[0].Time), tc.lo, tc.hi, tc.name)
				})
			})
		}
	})
	t.Run("a pod that finished on its own is terminated at once", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Terminal: true})
			r.update(podworker.SyncPodCreate, mkPod("p"))
			r.settle()
			calls := r.f.CallsFor("p")
			require.Len(t, calls, 3)
			assert.Equal(t, calls[0].Time, calls[2].Time, "no time passed")
		})
	})
	t.Run("termination hooks are retried too", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{BackOff: time.Second})
			r.f.Next("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Err: errBoom}, podworkertest.Result{Err: errBoom})
			r.f.Next("p", podworker.HookSyncTerminatedPod, podworkertest.Result{Err: errBoom})
			r.kill(mkPod("p"), nil)
			time.Sleep(time.Minute)
			assert.Equal(t, "kill(30)=error kill(30)=error kill(30) terminated=error terminated", r.trace("p"))
			calls := r.f.CallsFor("p")
			g := gaps(calls)
			between(t, g[0], time.Second, 1500*time.Millisecond, "first retry")
			between(t, g[1], 2*time.Second, 3*time.Second, "second retry")
			assert.Zero(t, g[2], "success moves on at once")
			between(t, g[3], time.Second, 1500*time.Millisecond, "a success reset the backoff")
			assert.True(t, r.info("p").Finished)
		})
	})
	t.Run("with an injected fake clock", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			fc := testingclock.NewFakeClock(time.Unix(1000, 0))
			f := &podworkertest.FakeSyncer[struct{}]{Clock: fc}
			w, err := podworker.New[struct{}](f, podworker.Options[struct{}]{Clock: fc, BackOff: 10 * time.Second, MaxBackOff: 10 * time.Second, ResyncInterval: -1})
			require.NoError(t, err)
			podworkertest.Start(t, w)
			f.Next("p", podworker.HookSyncPod, podworkertest.Result{Err: errBoom})
			require.NoError(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("p")}))
			synctest.Wait()
			require.True(t, fc.HasWaiters(), "the engine waits on the injected clock")
			time.Sleep(time.Hour) // bubble time passing does not matter: only the fake clock does
			require.Equal(t, "sync:create=error", f.Trace("p"))
			fc.Step(10*time.Second - time.Millisecond)
			synctest.Wait()
			require.Equal(t, "sync:create=error", f.Trace("p"), "not before BackOff")
			fc.Step(5 * time.Second)
			synctest.Wait()
			require.Equal(t, "sync:create=error sync:sync", f.Trace("p"), "by BackOff plus 50%")
			assert.False(t, fc.HasWaiters(), "nothing left to wait for")
		})
	})
}

func TestDecisionD9_OrphanTerminatesWithComputedGrace(t *testing.T) {
	noSpec := mkPod("nospec")
	noSpec.Spec.TerminationGracePeriodSeconds = nil
	spec45 := mkPod("spec45")
	spec45.Spec.TerminationGracePeriodSeconds = i64(45)
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		r.started(noSpec)
		r.started(spec45)
		r.w.SyncKnownPods(nil)
		assert.Equal(t, int64(45), r.info("spec45").GracePeriod)
		assert.Equal(t, int64(1), r.info("nospec").GracePeriod)
		r.settle()
		assert.Equal(t, "sync:create kill(45) terminated", r.trace("spec45"))
		assert.Equal(t, "sync:create kill(1) terminated", r.trace("nospec"))
	})
}

func TestDecisionD10_UpdateWithoutPodIsRejected(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		for _, ut := range []podworker.UpdateType{podworker.SyncPodSync, podworker.SyncPodUpdate, podworker.SyncPodCreate, podworker.SyncPodKill} {
			err := r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: ut})
			require.ErrorIs(t, err, podworker.ErrInvalidUpdate, ut.String())
		}
		r.settle()
		assert.Empty(t, r.w.Pods())
		assert.Empty(t, r.f.Calls())
		// A known pod is not disturbed by one either.
		r.started(mkPod("p"))
		require.ErrorIs(t, r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate}), podworker.ErrInvalidUpdate)
		r.settle()
		assert.Equal(t, "sync:create", r.trace("p"))
		assert.Equal(t, podworker.StageSyncing, r.info("p").Stage)
	})
}

func TestDecisionD11_GoroutinesFollowWork(t *testing.T) {
	t.Run("an idle pod holds no goroutine", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{ResyncInterval: time.Minute})
			r.settle()
			idle := bubbleGoroutines()
			const n = 500
			for i := range n {
				r.update(podworker.SyncPodCreate, mkPod(fmt.Sprint(i)))
			}
			r.settle()
			require.Equal(t, n, r.f.Count(podworkertest.AnyUID, podworker.HookSyncPod))
			assert.Equal(t, idle, bubbleGoroutines(), "500 synced, idle pods")

			// Work in progress does take goroutines, and gives them back.
			gates := make([]*podworkertest.Gate, 10)
			for i := range gates {
				gates[i] = r.hold(types.UID(fmt.Sprint(i)), podworker.HookSyncPod)
				r.update(podworker.SyncPodUpdate, mkPod(fmt.Sprint(i)))
			}
			r.settle()
			assert.Equal(t, idle+10, bubbleGoroutines(), "one goroutine per running hook")
			for _, g := range gates {
				g.Release()
			}
			r.settle()
			assert.Equal(t, idle, bubbleGoroutines())

			// Resyncs of every pod leave nothing behind either.
			time.Sleep(2 * time.Minute)
			r.settle()
			assert.Greater(t, r.f.Count(podworkertest.AnyUID, podworker.HookSyncPod), 2*n)
			assert.Equal(t, idle, bubbleGoroutines())
		})
	})
	t.Run("MaxConcurrentSyncs caps the hooks in flight", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{MaxConcurrentSyncs: 3})
			r.settle()
			idle := bubbleGoroutines()
			const n = 10
			gates := make([]*podworkertest.Gate, n)
			for i := range gates {
				gates[i] = r.hold(types.UID(fmt.Sprint(i)), podworker.HookSyncPod)
				r.update(podworker.SyncPodCreate, mkPod(fmt.Sprint(i)))
			}
			// Release the running hooks round by round: three run at a time
			// until fewer than three are left.
			done := map[int]bool{}
			for left := n; left > 0; left -= 3 {
				r.settle()
				require.Equal(t, min(3, left), r.f.InFlight())
				require.LessOrEqual(t, bubbleGoroutines(), idle+3, "no more workers than the cap")
				var running []*podworkertest.Gate
				for i, g := range gates {
					select {
					case <-g.Entered():
						if !done[i] {
							done[i] = true
							running = append(running, g)
						}
					default:
					}
				}
				require.Len(t, running, min(3, left))
				for _, g := range running {
					g.Release()
				}
			}
			r.settle()
			assert.Equal(t, n, r.f.Count(podworkertest.AnyUID, podworker.HookSyncPod))
			assert.Equal(t, 3, r.f.MaxInFlight())
			assert.Equal(t, idle, bubbleGoroutines())
		})
	})
	t.Run("when capped, termination work runs before setup work", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{MaxConcurrentSyncs: 1})
			r.started(mkPod("running"))
			g := r.hold("busy", podworker.HookSyncPod)
			r.update(podworker.SyncPodCreate, mkPod("busy"))
			r.entered(g) // the only slot is taken
			r.update(podworker.SyncPodCreate, mkPod("new1"))
			r.update(podworker.SyncPodCreate, mkPod("new2"))
			r.kill(mkPod("running"), nil)
			g.Release()
			r.settle()
			var order []string
			for _, c := range r.f.Calls()[2:] {
				order = append(order, string(c.UID)+":"+c.Hook.String())
			}
			assert.Equal(t, []string{
				"running:SyncTerminatingPod", "running:SyncTerminatedPod",
				"new1:SyncPod", "new2:SyncPod",
			}, order)
			assert.Equal(t, 1, r.f.MaxInFlight())
		})
	})
}

// bubbleGoroutines counts the goroutines of the caller's testing/synctest
// bubble (the test goroutine included). Unlike runtime.NumGoroutine it
// does not see goroutines of the test framework or of other tests.
func bubbleGoroutines() int {
	own := make([]byte, 1024)
	own = own[:runtime.Stack(own, false)]
	header, _, _ := strings.Cut(string(own), "\n")
	i := strings.Index(header, "synctest bubble ")
	if i < 0 {
		panic("bubbleGoroutines called outside a synctest bubble: " + header)
	}
	marker := header[i:]
	marker = marker[:strings.IndexAny(marker, ",]")]
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, line := range strings.Split(string(buf), "\n") {
		if !strings.HasPrefix(line, "goroutine ") {
			continue
		}
		if j := strings.Index(line, marker); j >= 0 && strings.ContainsAny(line[j+len(marker):j+len(marker)+1], ",]") {
			count++
		}
	}
	return count
}

// logSink collects log lines; safe for concurrent use.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 10})
}

func (s *logSink) find(substr string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

// all returns every line containing substr.
func (s *logSink) all(substr string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

func TestDecisionD12_PanickingHookIsAFailedSync(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var logs logSink
		metrics := newFakeMetrics()
		r := newRig(t, podworker.Options[struct{}]{Logger: logs.logger(), Metrics: metrics, BackOff: time.Second})
		r.start()
		p := mkPod("p")
		r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Panic: "sync exploded"})
		r.update(podworker.SyncPodCreate, p)
		r.settle()
		assert.Equal(t, "sync:create=panic", r.trace("p"))
		line := logs.find("sync exploded")
		require.NotEmpty(t, line, "the panic is logged")
		assert.Contains(t, line, "goroutine", "with its stack")
		assert.Contains(t, line, `"podUID"="p"`)
		assert.Equal(t, 1, metrics.counter("panics"))
		assert.Equal(t, 1, metrics.counter("retries/SyncPod"))

		time.Sleep(2 * time.Second) // the backoff
		assert.Equal(t, "sync:create=panic sync:sync", r.trace("p"), "retried with backoff")
		calls := r.f.CallsFor("p")
		between(t, calls[1].Time.Sub(calls[0].Time), time.Second, 1500*time.Millisecond, "backoff")

		r.f.Next("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Panic: errBoom})
		r.f.Next("p", podworker.HookSyncTerminatedPod, podworkertest.Result{Panic: 42})
		r.kill(p, nil)
		time.Sleep(time.Minute)
		assert.Equal(t, "sync:create=panic sync:sync kill(30)=panic kill(30) terminated=panic terminated", r.trace("p"))
		assert.True(t, r.info("p").Finished)
		assert.Equal(t, 3, metrics.counter("panics"))

		r.stop() // Run returns cleanly (nil; Start reports any error)
		require.ErrorIs(t, r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: mkPod("q")}), podworker.ErrStopped)
	})
}

// D13: a static pod that never started (its termination was requested
// while it waited for its full name) keeps the pod it was given: the
// snapshot shows it and SyncKnownPods reports HasConfig. The kubelet
// reports HasConfig false for it, as its worker never had an active update.
func TestDecisionD13_NeverStartedStaticPodKeepsItsConfig(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		holder, waiter := mkStatic("holder", "web"), mkStatic("waiter", "web")
		r.started(holder)
		r.update(podworker.SyncPodCreate, waiter)
		r.settle()
		require.Equal(t, podworker.StageNotStarted, r.info("waiter").Stage)
		r.kill(waiter, nil)
		r.settle()
		info := r.info("waiter")
		require.Equal(t, podworker.StageFinished, info.Stage)
		assert.Empty(t, r.trace("waiter"), "no hook ran for it")
		assert.Same(t, waiter, info.Pod)
		assert.False(t, info.RuntimeOnly)
		state := r.w.SyncKnownPods([]*v1.Pod{holder, waiter})
		assert.Equal(t, podworker.WorkerReport{Stage: podworker.StageFinished, HasConfig: true, Static: true}, state["waiter"])
	})
}

// D14: the engine never writes to the caller's KillPodOptions; the kubelet
// writes the effective grace period back into its override. Read the
// effective value with Pod (PodInfo.GracePeriod).
func TestDecisionD14_CallersKillPodOptionsAreNeverWritten(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		p := mkPod("p")
		r.started(p)
		g := r.hold("p", podworker.HookSyncTerminatingPod)
		first := i64(0)
		ko := &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: first}
		before := *ko
		r.kill(p, ko)
		r.entered(g)
		assert.Equal(t, int64(0), *first, "the effective grace (1) is read with Pod, not written back")
		assert.Equal(t, before, *ko)
		assert.Equal(t, int64(1), r.info("p").GracePeriod)

		// A longer request later is ignored (D1), and not rewritten either.
		later := i64(20)
		require.NoError(t, r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: p, KillPodOptions: &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: later}}))
		assert.Equal(t, int64(20), *later)
		g.Release()
		r.settle()
	})
}

// D15: there is no "network not ready" retry rule. The kubelet retries a
// sync whose error mentions that the network is not ready after 1 second
// instead of its backoff; podkit matches no error text. A syncer that
// wants a quick retry says so with RetryAfter.
func TestDecisionD15_NoNetworkNotReadyRetryRule(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		lo, hi time.Duration
	}{
		{"the kubelet's message backs off as usual", errors.New("network is not ready: container runtime network not ready: cni plugin not initialized"), 10 * time.Second, 15 * time.Second},
		{"RetryAfter asks for the quick retry", podworker.RetryAfter(errors.New("network is not ready"), time.Second), time.Second, time.Second + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				r := startRig(t, podworker.Options[struct{}]{BackOff: 10 * time.Second})
				r.f.Next("p", podworker.HookSyncPod, podworkertest.Result{Err: tc.err})
				r.update(podworker.SyncPodCreate, mkPod("p"))
				time.Sleep(time.Minute)
				calls := r.f.CallsFor("p")
				require.Len(t, calls, 2)
				between(t, calls[1].Time.Sub(calls[0].Time), tc.lo, tc.hi, tc.name)
			})
		})
	}
}

func TestShutdown(t *testing.T) {
	t.Run("Run returns only after every hook returned, even one that ignores ctx", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := newRig(t, podworker.Options[struct{}]{})
			stuck := r.f.HoldUncancelable("stuck", podworker.HookSyncPod)
			polite := r.hold("polite", podworker.HookSyncTerminatingPod)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.w.Run(ctx) }()
			r.update(podworker.SyncPodCreate, mkPod("stuck"))
			r.kill(mkPod("polite"), nil)
			r.entered(stuck)
			r.entered(polite)
			cancel()
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("Run returned %v while a hook still ran", err)
			default:
			}
			requireClosed(t, polite.Returned())
			assert.True(t, r.f.CallsFor("polite")[0].Canceled, "a running hook's ctx is cancelled at shutdown")
			assert.Equal(t, 1, r.f.InFlight())
			stuck.Release()
			require.NoError(t, <-done)
			assert.Equal(t, 0, r.f.InFlight())

			// Afterwards: ErrStopped, the window still answers, and nothing more runs.
			require.ErrorIs(t, r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: mkPod("stuck")}), podworker.ErrStopped)
			require.ErrorIs(t, r.w.KillPod(r.ctx, mkPod("stuck"), podworker.KillPodOptions{}), podworker.ErrStopped)
			require.ErrorIs(t, r.w.Run(context.Background()), podworker.ErrStopped)
			assert.True(t, r.w.CouldHaveRunningContainers("polite"))
			assert.Equal(t, podworker.StageTerminating, r.info("polite").Stage)
			_, _, err := r.w.WaitFor(r.ctx, "polite", func(info podworker.PodInfo, _ bool) bool { return info.Finished })
			require.ErrorIs(t, err, podworker.ErrStopped)
			time.Sleep(time.Hour)
			assert.Equal(t, "kill(30)=canceled", r.trace("polite"), "no retry after shutdown")
		})
	})
	t.Run("no goroutine is left", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			before := bubbleGoroutines()
			r := startRig(t, podworker.Options[struct{}]{ResyncInterval: time.Second})
			for i := range 50 {
				r.update(podworker.SyncPodCreate, mkPod(fmt.Sprint(i)))
			}
			r.f.Always(podworkertest.AnyUID, podworker.HookSyncTerminatingPod, podworkertest.Result{Err: errBoom})
			for i := range 25 {
				r.kill(mkPod(fmt.Sprint(i)), nil)
			}
			g := r.hold("49", podworker.HookSyncPod)
			time.Sleep(5 * time.Second)
			r.entered(g)
			r.w.Subscribe(make(chan podworker.Transition, 1))
			r.stop()
			// Goroutines that are done may still be returning: settle, and
			// anything left is blocked for good, a leak.
			r.settle()
			assert.Equal(t, before, bubbleGoroutines())
			// Leaving the bubble also fails if any goroutine it started is
			// still there.
		})
	})
	t.Run("KillPod waiting when Run stops returns ErrStopped", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			r.f.Always("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Err: errBoom})
			res := make(chan error, 1)
			go func() { res <- r.w.KillPod(context.Background(), mkPod("p"), podworker.KillPodOptions{}) }()
			r.settle()
			r.stop()
			require.ErrorIs(t, <-res, podworker.ErrStopped)
		})
	})
	t.Run("a second Run while running is an error", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			r.settle()
			err := r.w.Run(context.Background())
			require.Error(t, err)
			require.NotErrorIs(t, err, podworker.ErrStopped)
		})
	})
}
