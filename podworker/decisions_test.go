package podworker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// The decisions of SPEC's table, where podkit differs from the kubelet on
// purpose. Those the machine makes are told in the interaction scripts,
// which TestMachine and TestDriver run through both layers, one script per
// decision where it has one: testdata/decision_d1_grace_only_shortens.txt,
// decision_d2_completed_ch_closed_when_nothing_can_run.txt,
// decision_d3_later_deletion_and_eviction_count.txt,
// decision_d4_first_seen_terminal_pod.txt (the machine's half),
// decision_d9_orphan_terminates_with_computed_grace.txt,
// decision_d12_panicking_hook_is_a_failed_sync.txt (the transitions) and
// decision_d15_no_network_not_ready_rule.txt; D7 (a freed static slot
// starts the next pod by itself) and D13 (a never-started static pod keeps
// its config) in static_pods.txt; D8 (retries and resyncs are the
// engine's own) in complete_work.txt too.
//
// The tests here are the decisions only the driver can show: what the
// StatusSource decides (D4), the backoff and resyncs with real jitter, and
// the error trees a delay is found in (D8), input checks (D10), goroutines
// (D11), the logs and metrics of a panic (D12), and the caller's options
// (D14). D5 (mirror pod AlreadyExists) and D6 (pod manager removal and UID
// translations) are not the engine's: the mirror and podmanager packages
// test them.

var errBoom = errors.New("boom")

// started creates pod and lets its first SyncPod run.
func (r *rig) started(pod *v1.Pod) {
	r.t.Helper()
	r.update(podworker.SyncPodCreate, pod)
	r.settle()
	require.Equal(r.t, podworker.StageSyncing, r.info(pod.UID).Stage)
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
			// The worker that ran it waits, warm, for a second of the clock.
			require.True(t, fc.HasWaiters(), "the warm worker's idle timeout is on the injected clock")
			fc.Step(time.Second)
			synctest.Wait()
			fc.Step(time.Second)
			synctest.Wait()
			assert.False(t, fc.HasWaiters(), "nothing left to wait for")
		})
	})
}
