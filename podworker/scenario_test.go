package podworker_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// The scenarios of the kubelet's pod_workers_test, told in podkit's terms.
// Its TestUpdatePod is told to both layers by testdata/update_pod.txt (see
// TestMachine and TestDriver); KillPod's are in killpod_test.go, the static
// pods' in static_pods_test.go, and the rig they all run on in rig_test.go.

func TestUpdatePodParallel(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		const n = 20
		// Pod j gets j+1 creates, named 0..j, while its worker runs.
		for i := range n {
			for j := i; j < n; j++ {
				p := podworkertest.NewPod(types.UID(strconv.Itoa(j)), "ns", strconv.Itoa(i))
				r.update(podworker.SyncPodCreate, p)
			}
		}
		r.settle()
		for j := range n {
			uid := types.UID(strconv.Itoa(j))
			calls := r.f.CallsFor(uid)
			require.NotEmpty(t, calls, "pod %s never synced", uid)
			require.LessOrEqual(t, len(calls), j+1, "pod %s synced more often than it was updated", uid)
			for _, c := range calls {
				require.Equal(t, podworker.HookSyncPod, c.Hook)
				require.Equal(t, podworker.SyncPodCreate, c.UpdateType)
			}
			require.Equal(t, strconv.Itoa(j), calls[len(calls)-1].Pod.Name, "pod %s: the newest update must be the last synced", uid)
		}
		require.Equal(t, 1, r.f.MaxInFlightPerUID())
	})
}

// A terminal pod whose status shows nothing running skips
// SyncTerminatingPod (decision D4; upstream: the "cached terminal state"
// case of TestUpdatePod).
func TestUpdatePodTerminalPodWithStoppedStatus(t *testing.T) {
	bubble(t, func(t *testing.T) {
		f := podworkertest.NewFakeSyncer[stoppedStatus]()
		w, err := podworker.New[stoppedStatus](f, podworker.Options[stoppedStatus]{Status: stoppedSource{stopped: true}, ResyncInterval: -1})
		require.NoError(t, err)
		podworkertest.Start(t, w)
		require.NoError(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: inPhase(mkPod("1"), v1.PodSucceeded)}))
		synctest.Wait()
		info, ok := w.Pod("1")
		require.True(t, ok)
		assert.True(t, info.Finished)
		assert.Equal(t, "terminated", f.Trace("1"))
		assert.True(t, w.IsPodKnownTerminated("1"))
	})
}

// stoppedStatus is a runtime status that says whether anything runs.
type stoppedStatus struct{ stopped bool }

// stoppedSource is a StatusSource and StoppedChecker with a fixed answer.
type stoppedSource struct {
	stopped bool
	err     error
}

func (s stoppedSource) PodStatus(context.Context, types.UID, time.Time) (stoppedStatus, error) {
	return stoppedStatus{stopped: s.stopped}, s.err
}

func (stoppedSource) NothingRunning(s stoppedStatus) bool { return s.stopped }

// Upstream's TestCompleteWork_PendingUpdate: after a hook, a pending update
// runs at once; with nothing pending the worker goes idle.
func TestCompleteWorkPendingUpdate(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{BackOff: time.Hour})
		p := mkPod("1")
		r.update(podworker.SyncPodCreate, p)
		r.settle()
		assert.False(t, r.info("1").Working, "nothing pending: the worker is idle")

		// A failing hook with a newer update waiting: the update runs at
		// once instead of after the (hour-long) backoff.
		g := r.hold("1", podworker.HookSyncPod)
		r.f.Next("1", podworker.HookSyncPod, podworkertest.Result{Err: fmt.Errorf("boom")})
		r.update(podworker.SyncPodUpdate, p)
		r.entered(g)
		r.update(podworker.SyncPodUpdate, mkPod("1"))
		assert.True(t, r.info("1").Working)
		g.Release()
		r.settle()
		assert.Equal(t, "sync:create sync:update=error sync:update", r.trace("1"))
		assert.False(t, r.info("1").Working)
	})
}

func TestUpdatePodForRuntimePod(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		rp := &podworker.RuntimePod{UID: "1", Namespace: "test", Name: "1"}
		err := r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, RunningPod: rp})
		require.ErrorIs(t, err, podworker.ErrInvalidUpdate)
		r.settle()
		require.Empty(t, r.f.Calls())

		r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: rp})
		r.settle()
		calls := r.f.Calls()
		require.Len(t, calls, 1)
		assert.Equal(t, podworker.HookSyncTerminatingRuntimePod, calls[0].Hook)
		assert.Equal(t, *rp, calls[0].RuntimePod)
		r.absent("1")
	})
}

func TestUpdatePodForTerminatedRuntimePod(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		p := mkPod("1")
		rp := &podworker.RuntimePod{UID: "1", Namespace: "ns", Name: "1"}
		r.update(podworker.SyncPodCreate, p)
		r.settle()
		g := r.hold("1", podworker.HookSyncTerminatedPod)
		r.kill(p, nil)
		r.entered(g)
		require.Equal(t, podworker.StageTerminated, r.info("1").Stage)

		// A stale runtime listing still shows the pod: it must not rerun
		// termination or cleanup, and its channel closes at once.
		done := make(chan struct{})
		r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: rp, KillPodOptions: &podworker.KillPodOptions{CompletedCh: done}})
		requireClosed(t, done)
		g.Release()
		r.settle()
		assert.Equal(t, "sync:create kill(30) terminated", r.trace("1"))
		assert.True(t, r.info("1").Finished)

		// Once finished too.
		done = make(chan struct{})
		r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: rp, KillPodOptions: &podworker.KillPodOptions{CompletedCh: done}})
		requireClosed(t, done)
		r.settle()
		assert.Equal(t, "sync:create kill(30) terminated", r.trace("1"))
		assert.Zero(t, r.f.Count("1", podworker.HookSyncTerminatingRuntimePod))
	})
}

func requireClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	default:
		t.Fatal("channel is not closed")
	}
}

func requireOpen(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
		t.Fatal("channel is closed")
	default:
	}
}

func TestUpdatePodDoesNotForgetSyncPodKill(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		const n = 20
		for i := range n {
			p := mkPod(strconv.Itoa(i))
			r.update(podworker.SyncPodCreate, p)
			r.kill(p, nil)
			r.update(podworker.SyncPodUpdate, p)
		}
		r.settle()
		for i := range n {
			uid := types.UID(strconv.Itoa(i))
			// The create may be coalesced into the kill; the kill never is.
			assert.Contains(t, []string{"kill(30) terminated", "sync:create kill(30) terminated"}, r.trace(uid), "pod %s", uid)
			assert.True(t, r.info(uid).Finished)
		}
	})
}

func TestTerminalPhaseTransition(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		p := mkPod("1")
		r.update(podworker.SyncPodUpdate, p)
		r.settle()
		require.False(t, r.w.IsPodKnownTerminated("1"))
		r.update(podworker.SyncPodUpdate, p)
		r.settle()
		require.False(t, r.w.IsPodKnownTerminated("1"))
		require.False(t, r.w.IsPodTerminationRequested("1"))

		r.f.Next("1", podworker.HookSyncPod, podworkertest.Result{Terminal: true})
		r.update(podworker.SyncPodUpdate, p)
		r.settle()
		assert.Equal(t, "sync:update sync:update sync:update=terminal kill(30) terminated", r.trace("1"))
		info := r.info("1")
		assert.True(t, info.TerminationRequested)
		assert.True(t, info.Finished)
		assert.False(t, info.Deleted)
		assert.False(t, info.Evicted)
		assert.True(t, r.w.IsPodKnownTerminated("1"))
	})
}

func TestSyncKnownPods(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		const n = 20
		for i := range n {
			r.update(podworker.SyncPodUpdate, mkPod(strconv.Itoa(i)))
		}
		r.settle()
		desired := []*v1.Pod{mkPod("2"), mkPod("14")}
		// Kill all but the desired pods; the even ones are deleted.
		for i := range n {
			if i == 2 || i == 14 {
				continue
			}
			p := mkPod(strconv.Itoa(i))
			if i%2 == 0 {
				p = deleted(p, nil)
			}
			r.kill(p, nil)
		}
		r.settle()

		assert.True(t, r.w.ShouldPodContainersBeTerminating("0"))
		assert.True(t, r.w.ShouldPodContainersBeTerminating("1"))
		assert.False(t, r.w.ShouldPodContainersBeTerminating("2"))
		assert.True(t, r.w.IsPodTerminationRequested("0"))
		assert.False(t, r.w.IsPodTerminationRequested("2"))
		assert.False(t, r.w.CouldHaveRunningContainers("0"))
		assert.False(t, r.w.CouldHaveRunningContainers("1"))
		assert.True(t, r.w.CouldHaveRunningContainers("2"))
		assert.True(t, r.w.ShouldPodContentBeRemoved("0"), "deleted and terminated")
		assert.False(t, r.w.ShouldPodContentBeRemoved("1"), "terminated but not deleted")
		assert.False(t, r.w.ShouldPodContentBeRemoved("2"), "not terminated")
		// Unknown before the first SyncKnownPods: could be running.
		assert.False(t, r.w.ShouldPodContainersBeTerminating("abc"))
		assert.True(t, r.w.CouldHaveRunningContainers("abc"))
		assert.False(t, r.w.ShouldPodContentBeRemoved("abc"))

		state := r.w.SyncKnownPods(desired)
		assert.Equal(t, map[types.UID]podworker.WorkerReport{
			"2":  {Stage: podworker.StageSyncing, HasConfig: true},
			"14": {Stage: podworker.StageSyncing, HasConfig: true},
		}, state)
		assert.Len(t, r.w.Pods(), 2)
		assert.False(t, r.w.IsPodTerminationRequested("2"))
		// Unknown after it: known not to run.
		assert.True(t, r.w.ShouldPodContainersBeTerminating("abc"))
		assert.False(t, r.w.CouldHaveRunningContainers("abc"))
		assert.True(t, r.w.ShouldPodContentBeRemoved("abc"))

		// Desired pods that are no longer desired are orphans: terminated
		// (decision D9: with their grace) and kept until finished.
		state = r.w.SyncKnownPods(nil)
		assert.Equal(t, map[types.UID]podworker.WorkerReport{
			"2":  {Stage: podworker.StageTerminationRequested, Orphan: true, HasConfig: true},
			"14": {Stage: podworker.StageTerminationRequested, Orphan: true, HasConfig: true},
		}, state)
		assert.Len(t, r.w.Pods(), 2)
		r.settle()
		for _, uid := range []types.UID{"2", "14"} {
			info := r.info(uid)
			assert.True(t, info.Finished)
			assert.True(t, info.Deleted, "an orphan counts as deleted")
			assert.Equal(t, "sync:update kill(30) terminated", r.trace(uid))
		}
		assert.Empty(t, r.w.SyncKnownPods(nil))
		assert.Empty(t, r.w.Pods())
	})
}

// TestRemoveTerminatedWorker covers what SyncKnownPods does with each kind of
// worker (upstream's removeTerminatedWorker cases, with decisions D8 and
// D9: the engine itself drives a kept orphan to the end).
func TestRemoveTerminatedWorker(t *testing.T) {
	p := mkPod("p")
	// synced starts the engine and syncs p once.
	synced := func(r *rig) {
		r.start()
		r.update(podworker.SyncPodCreate, p)
		r.settle()
	}
	for _, tc := range []struct {
		name string
		// setup gets an engine that is not running yet. It returns what
		// lets the worker go on (nil: nothing to do).
		setup   func(r *rig) (goOn func())
		desired bool
		// removed: SyncKnownPods forgot the worker. Otherwise it reports
		// state.
		removed bool
		state   podworker.WorkerReport
		// trace is p's whole trace once the worker went on and settled.
		trace string
		check func(t *testing.T, r *rig)
	}{{
		name:    "finished worker, orphaned",
		setup:   func(r *rig) func() { synced(r); r.kill(p, nil); return nil },
		removed: true,
		trace:   "sync:create kill(30) terminated",
	}, {
		name:    "finished worker, still desired",
		setup:   func(r *rig) func() { synced(r); r.kill(p, nil); return nil },
		desired: true,
		state:   podworker.WorkerReport{Stage: podworker.StageFinished, HasConfig: true},
		trace:   "sync:create kill(30) terminated",
		check: func(t *testing.T, r *rig) {
			assert.True(t, r.info("p").Finished)
		},
	}, {
		name: "finished worker that asked for a restart, still desired",
		setup: func(r *rig) func() {
			synced(r)
			g := r.hold("p", podworker.HookSyncTerminatedPod)
			r.kill(p, nil)
			r.entered(g)
			r.update(podworker.SyncPodCreate, p)
			g.Release()
			r.settle()
			return nil
		},
		desired: true,
		removed: true,
		trace:   "sync:create kill(30) terminated",
	}, {
		name: "worker that asked for a restart and is not finished yet",
		setup: func(r *rig) func() {
			synced(r)
			g := r.hold("p", podworker.HookSyncTerminatedPod)
			r.kill(p, nil)
			r.entered(g)
			r.update(podworker.SyncPodCreate, p)
			return g.Release
		},
		desired: true,
		state:   podworker.WorkerReport{Stage: podworker.StageTerminated, HasConfig: true},
		trace:   "sync:create kill(30) terminated",
		check: func(t *testing.T, r *rig) {
			info := r.info("p")
			assert.True(t, info.Finished)
			assert.True(t, info.RestartRequested)
		},
	}, {
		name: "static worker waiting for another pod's full name",
		setup: func(r *rig) func() {
			r.start()
			r.update(podworker.SyncPodCreate, mkStatic("other", "p"))
			r.update(podworker.SyncPodCreate, mkStatic("p", "p"))
			return nil
		},
		desired: true,
		state:   podworker.WorkerReport{Stage: podworker.StageNotStarted, HasConfig: true, Static: true},
		trace:   "",
		check: func(t *testing.T, r *rig) {
			assert.Equal(t, podworker.StageNotStarted, r.info("p").Stage)
		},
	}, {
		name: "orphaned static worker waiting",
		setup: func(r *rig) func() {
			r.start()
			r.update(podworker.SyncPodCreate, mkStatic("other", "p"))
			r.update(podworker.SyncPodCreate, mkStatic("p", "p"))
			r.settle()
			return nil
		},
		removed: true,
		trace:   "",
		check: func(t *testing.T, r *rig) {
			// Only "other" is left; p never started.
			assert.Equal(t, "sync:create", r.trace("other"))
		},
	}, {
		name: "worker not started yet",
		setup: func(r *rig) func() {
			r.update(podworker.SyncPodCreate, p)
			return r.start
		},
		desired: true,
		state:   podworker.WorkerReport{Stage: podworker.StageNotStarted, HasConfig: true},
		trace:   "sync:create",
	}, {
		name: "orphaned worker not started yet",
		setup: func(r *rig) func() {
			r.update(podworker.SyncPodCreate, p)
			return r.start
		},
		removed: true,
		trace:   "",
	}, {
		name:  "orphaned started worker",
		setup: func(r *rig) func() { synced(r); return nil },
		state: podworker.WorkerReport{Stage: podworker.StageTerminationRequested, Orphan: true, HasConfig: true},
		trace: "sync:create kill(30) terminated",
		check: func(t *testing.T, r *rig) {
			info := r.info("p")
			assert.True(t, info.Deleted)
			assert.Equal(t, int64(30), info.GracePeriod)
		},
	}, {
		name: "orphaned terminating worker",
		setup: func(r *rig) func() {
			synced(r)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			r.kill(p, nil)
			r.entered(g)
			return g.Release
		},
		state: podworker.WorkerReport{Stage: podworker.StageTerminating, Orphan: true, HasConfig: true},
		trace: "sync:create kill(30) terminated",
		check: func(t *testing.T, r *rig) {
			assert.True(t, r.info("p").Deleted, "an orphan counts as deleted (decision D3)")
		},
	}, {
		name: "orphaned terminating worker with a newer pending update",
		setup: func(r *rig) func() {
			synced(r)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			r.f.Next("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Err: fmt.Errorf("not yet")})
			r.kill(p, nil)
			r.entered(g)
			newer := p.DeepCopy()
			newer.Labels = map[string]string{"v": "2"}
			r.update(podworker.SyncPodUpdate, newer)
			return g.Release
		},
		state: podworker.WorkerReport{Stage: podworker.StageTerminating, Orphan: true, HasConfig: true},
		trace: "sync:create kill(30)=error kill(30) terminated",
		check: func(t *testing.T, r *rig) {
			calls := r.f.CallsFor("p")
			assert.Equal(t, "2", calls[2].Pod.Labels["v"], "the retry acts on the newest pod")
		},
	}, {
		name: "orphaned terminated worker",
		setup: func(r *rig) func() {
			synced(r)
			g := r.hold("p", podworker.HookSyncTerminatedPod)
			r.kill(p, nil)
			r.entered(g)
			return g.Release
		},
		state: podworker.WorkerReport{Stage: podworker.StageTerminated, Orphan: true, HasConfig: true},
		trace: "sync:create kill(30) terminated",
	}, {
		name: "orphaned runtime-only worker not run yet",
		setup: func(r *rig) func() {
			r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: &podworker.RuntimePod{UID: "p", Namespace: "ns", Name: "p"}})
			return r.start
		},
		state: podworker.WorkerReport{Stage: podworker.StageTerminationRequested, Orphan: true},
		trace: "kill-runtime",
		check: func(t *testing.T, r *rig) {
			r.absent("p")
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				r := newRig(t, podworker.Options[struct{}]{})
				goOn := tc.setup(r)
				r.settle()
				// "other" (the static pod some cases start first) stays desired.
				desired := []*v1.Pod{mkStatic("other", "p")}
				if tc.desired {
					desired = append(desired, p)
				}
				state := r.w.SyncKnownPods(desired)
				if tc.removed {
					assert.NotContains(t, state, types.UID("p"))
					r.absent("p")
				} else {
					assert.Equal(t, tc.state, state["p"])
				}
				if goOn != nil {
					goOn()
				}
				if r.stop == nil {
					r.start()
				}
				r.settle()
				assert.Equal(t, tc.trace, r.trace("p"))
				if tc.check != nil {
					tc.check(t, r)
				}
				if !tc.desired && !tc.removed {
					// The kept orphan finished: the next call forgets it.
					assert.NotContains(t, r.w.SyncKnownPods(nil), types.UID("p"))
					r.absent("p")
				}
			})
		})
	}
}
