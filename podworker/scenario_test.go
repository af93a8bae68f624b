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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// The scenarios of the kubelet's pod_workers_test, told in podkit's terms.
// Every test runs in a testing/synctest bubble: synctest.Wait is the
// "drain the workers" step, and time only moves when a test sleeps.

// rig is one engine with a FakeSyncer, inside a synctest bubble.
type rig struct {
	t    *testing.T
	ctx  context.Context
	f    *podworkertest.FakeSyncer[struct{}]
	w    *podworker.PodWorkers[struct{}]
	stop func()
}

// newRig makes an engine that is not running yet. Resyncs are off unless
// opts asks for them, so traces only show what a test caused.
func newRig(t *testing.T, opts podworker.Options[struct{}]) *rig {
	t.Helper()
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = -1
	}
	f := podworkertest.NewFakeSyncer[struct{}]()
	w, err := podworker.New[struct{}](f, opts)
	require.NoError(t, err)
	return &rig{t: t, ctx: context.Background(), f: f, w: w}
}

// startRig is newRig plus Run.
func startRig(t *testing.T, opts podworker.Options[struct{}]) *rig {
	r := newRig(t, opts)
	r.start()
	return r
}

func (r *rig) start() { r.stop = podworkertest.Start(r.t, r.w) }

func (r *rig) send(o podworker.UpdatePodOptions) {
	r.t.Helper()
	require.NoError(r.t, r.w.UpdatePod(r.ctx, o))
}

func (r *rig) update(ut podworker.UpdateType, pod *v1.Pod) {
	r.t.Helper()
	r.send(podworker.UpdatePodOptions{UpdateType: ut, Pod: pod})
}

func (r *rig) kill(pod *v1.Pod, ko *podworker.KillPodOptions) {
	r.t.Helper()
	r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: pod, KillPodOptions: ko})
}

// settle waits until every goroutine of the bubble is blocked: the engine
// has done all it can do without time passing.
func (r *rig) settle() { synctest.Wait() }

func (r *rig) info(uid types.UID) podworker.PodInfo {
	r.t.Helper()
	info, ok := r.w.Pod(uid)
	require.True(r.t, ok, "no worker for %s", uid)
	return info
}

func (r *rig) absent(uid types.UID) {
	r.t.Helper()
	_, ok := r.w.Pod(uid)
	require.False(r.t, ok, "worker for %s still exists", uid)
}

func (r *rig) hold(uid types.UID, h podworker.Hook) *podworkertest.Gate {
	return r.f.Hold(uid, h)
}

// entered settles and requires that g's hook is being held. It never
// blocks on the gate, so fake time cannot jump to a resync or retry.
func (r *rig) entered(g *podworkertest.Gate) {
	r.t.Helper()
	synctest.Wait()
	select {
	case <-g.Entered():
	default:
		r.t.Fatal("the held hook was not entered")
	}
}

func (r *rig) trace(uid types.UID) string { return r.f.Trace(uid) }

func mkPod(uid string) *v1.Pod { return podworkertest.NewPod(types.UID(uid), "ns", uid) }

func mkStatic(uid, name string) *v1.Pod {
	return podworkertest.NewStaticPod(types.UID(uid), "ns", name)
}

// deleted returns a copy of p with a deletion timestamp and grace.
func deleted(p *v1.Pod, grace *int64) *v1.Pod {
	p = p.DeepCopy()
	p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	p.DeletionGracePeriodSeconds = grace
	return p
}

// inPhase returns a copy of p in the given phase.
func inPhase(p *v1.Pod, phase v1.PodPhase) *v1.Pod {
	p = p.DeepCopy()
	p.Status.Phase = phase
	return p
}

func i64(v int64) *int64 { return &v }

func bubble(t *testing.T, f func(t *testing.T)) { synctest.Test(t, f) }

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

func TestUpdatePod(t *testing.T) {
	labelled := func(p *v1.Pod) *v1.Pod {
		p = p.DeepCopy()
		p.Labels = map[string]string{"updated": "value"}
		return p
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, r *rig)
	}{{
		name: "a new pod is recorded and started",
		run: func(t *testing.T, r *rig) {
			p := mkPod("1")
			r.update(podworker.SyncPodCreate, p)
			r.settle()
			info := r.info("1")
			assert.Equal(t, podworker.StageSyncing, info.Stage)
			assert.True(t, info.Started)
			assert.Same(t, p, info.Pod)
			assert.Equal(t, "1_ns", info.FullName)
			assert.Equal(t, "sync:create", r.trace("1"))
			assert.False(t, r.w.IsPodKnownTerminated("1"))
		},
	}, {
		name: "a create during termination requests a restart and the pod still finishes",
		run: func(t *testing.T, r *rig) {
			p := mkPod("1")
			r.update(podworker.SyncPodCreate, p)
			r.settle()
			g := r.hold("1", podworker.HookSyncTerminatingPod)
			r.kill(p, nil)
			r.entered(g)
			r.update(podworker.SyncPodCreate, labelled(p))
			g.Release()
			r.settle()
			info := r.info("1")
			assert.True(t, info.RestartRequested)
			assert.True(t, info.Finished)
			assert.Equal(t, int64(30), info.GracePeriod)
			assert.Equal(t, "sync:create kill(30) terminated", r.trace("1"))
			for _, c := range r.f.CallsFor("1") {
				assert.Empty(t, c.Pod.Labels, "the create that asked for a restart was never synced")
			}
			assert.True(t, r.w.IsPodKnownTerminated("1"))
		},
	}, {
		name: "a RunningPod next to a Pod is ignored",
		run: func(t *testing.T, r *rig) {
			r.send(podworker.UpdatePodOptions{
				UpdateType: podworker.SyncPodCreate,
				Pod:        mkPod("1"),
				RunningPod: &podworker.RuntimePod{UID: "1", Namespace: "ns", Name: "orphaned-pod"},
			})
			r.settle()
			info := r.info("1")
			assert.False(t, info.RuntimeOnly)
			assert.Equal(t, "1_ns", info.FullName)
			assert.Equal(t, "sync:create", r.trace("1"))
		},
	}, {
		name: "a running pod is terminated when an update has a deletion timestamp",
		run: func(t *testing.T, r *rig) {
			p := mkPod("1")
			r.update(podworker.SyncPodCreate, p)
			r.settle()
			r.update(podworker.SyncPodUpdate, deleted(p, i64(15)))
			r.settle()
			info := r.info("1")
			assert.True(t, info.Deleted)
			assert.False(t, info.Evicted)
			assert.True(t, info.Finished)
			assert.Equal(t, int64(15), info.GracePeriod)
			assert.Equal(t, "sync:create kill(15) terminated", r.trace("1"))
			assert.True(t, r.w.IsPodKnownTerminated("1"))
		},
	}, {
		name: "a running pod is terminated when an eviction is requested",
		run: func(t *testing.T, r *rig) {
			p := mkPod("1")
			r.update(podworker.SyncPodCreate, p)
			r.settle()
			r.kill(p, &podworker.KillPodOptions{Evict: true})
			r.settle()
			info := r.info("1")
			assert.True(t, info.Evicted)
			assert.False(t, info.Deleted)
			assert.True(t, info.Finished)
			assert.Equal(t, int64(30), info.GracePeriod)
			assert.Equal(t, "sync:create kill(30) terminated", r.trace("1"))
		},
	}, {
		name: "a terminal pod seen for the first time with no status is terminated (D4's safe path)",
		run: func(t *testing.T, r *rig) {
			r.update(podworker.SyncPodCreate, inPhase(mkPod("1"), v1.PodSucceeded))
			r.settle()
			info := r.info("1")
			assert.True(t, info.Started, "a non-static pod killed before it starts is still started")
			assert.True(t, info.Finished)
			assert.Equal(t, "kill(30) terminated", r.trace("1"))
			assert.True(t, r.w.IsPodKnownTerminated("1"))
		},
	}, {
		name: "an orphaned running pod never seen is terminated and then forgotten",
		run: func(t *testing.T, r *rig) {
			// Look before the worker runs: the engine is not started yet.
			r.stop()
			r2 := newRig(t, podworker.Options[struct{}]{})
			r2.send(podworker.UpdatePodOptions{
				UpdateType: podworker.SyncPodKill,
				RunningPod: &podworker.RuntimePod{UID: "1", Namespace: "ns", Name: "orphaned-pod"},
			})
			info := r2.info("1")
			assert.Equal(t, podworker.StageTerminationRequested, info.Stage)
			assert.True(t, info.Deleted)
			assert.True(t, info.RuntimeOnly)
			assert.Equal(t, "orphaned-pod_ns", info.FullName)
			assert.Equal(t, int64(1), info.GracePeriod)
			assert.True(t, info.Working)
			r2.start()
			r2.settle()
			assert.Equal(t, "kill-runtime", r2.trace("1"))
			r2.absent("1")
			assert.False(t, r2.w.IsPodKnownTerminated("1"), "a forgotten runtime pod is not known")
		},
	}, {
		name: "a RunningPod with a non-kill update is rejected and records nothing",
		run: func(t *testing.T, r *rig) {
			err := r.w.UpdatePod(r.ctx, podworker.UpdatePodOptions{
				UpdateType: podworker.SyncPodCreate,
				RunningPod: &podworker.RuntimePod{UID: "1", Namespace: "ns", Name: "orphaned-pod"},
			})
			require.ErrorIs(t, err, podworker.ErrInvalidUpdate)
			r.settle()
			r.absent("1")
			assert.Empty(t, r.f.Calls())
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				tc.run(t, startRig(t, podworker.Options[struct{}]{}))
			})
		})
	}
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

// TestStaticPodExclusion walks upstream's static pod scenario: one started
// static pod per full name, FIFO starts, a waiting pod that is killed never
// starts, the slot frees only when its holder finished, and (decision D7)
// the next waiting pod starts without another UpdatePod.
func TestStaticPodExclusion(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		const full = "pod1_test1"
		static := func(uid string) *v1.Pod { return podworkertest.NewStaticPod(types.UID(uid), "test1", "pod1") }
		normal := podworkertest.NewPod("1-normal", "test1", "pod1")

		// A normal pod and a static pod of the same full name both start.
		r.update(podworker.SyncPodUpdate, normal)
		r.update(podworker.SyncPodUpdate, static("2-static"))
		r.settle()
		assert.Equal(t, "sync:update", r.trace("1-normal"))
		assert.Equal(t, "sync:update", r.trace("2-static"))
		assert.True(t, r.info("2-static").Static)
		assert.False(t, r.info("1-normal").Static)

		// Two more static pods wait.
		r.update(podworker.SyncPodUpdate, static("3-static"))
		r.update(podworker.SyncPodUpdate, static("4-static"))
		r.settle()
		for _, uid := range []types.UID{"3-static", "4-static"} {
			assert.Empty(t, r.trace(uid))
			assert.Equal(t, podworker.StageNotStarted, r.info(uid).Stage)
			assert.True(t, r.w.CouldHaveRunningContainers(uid))
		}
		// Another update does not let 3-static jump the holder.
		r.update(podworker.SyncPodUpdate, static("3-static"))
		r.settle()
		assert.Empty(t, r.trace("3-static"))

		// 3-static is killed while waiting: it never starts and is finished
		// with no hook called; 2-static still holds the name.
		done3 := make(chan struct{})
		r.kill(static("3-static"), &podworker.KillPodOptions{CompletedCh: done3})
		r.settle()
		info := r.info("3-static")
		assert.True(t, info.Finished)
		assert.False(t, info.Started)
		assert.False(t, info.TerminationStarted)
		assert.True(t, r.w.IsPodKnownTerminated("3-static"))
		assert.Empty(t, r.trace("3-static"))
		requireClosed(t, done3) // decision D2
		if assert.NotNil(t, info.Pod, "a never-started pod keeps its pod") {
			assert.Equal(t, types.UID("3-static"), info.Pod.UID)
		}
		assert.False(t, info.RuntimeOnly)
		assert.Empty(t, r.trace("4-static"))

		// Kill 2-static. While its cleanup runs the name stays taken.
		gTerm := r.hold("2-static", podworker.HookSyncTerminatingPod)
		gDone := r.hold("2-static", podworker.HookSyncTerminatedPod)
		r.kill(static("2-static"), nil)
		r.entered(gTerm)
		assert.True(t, r.w.IsPodForMirrorPodTerminatingByFullName(full))
		gTerm.Release()
		r.entered(gDone)
		assert.False(t, r.w.IsPodForMirrorPodTerminatingByFullName(full), "terminated: no longer terminating")
		assert.Empty(t, r.trace("4-static"), "the slot is freed only when the holder finished")
		gDone.Release()
		r.settle()
		// D7: 4-static starts by itself, with its own pending update.
		assert.Equal(t, "sync:update", r.trace("4-static"))
		assert.Equal(t, podworker.StageSyncing, r.info("4-static").Stage)

		// SyncKnownPods with every pod desired reports them all.
		state := r.w.SyncKnownPods([]*v1.Pod{normal, static("2-static"), static("3-static"), static("4-static")})
		assert.Equal(t, map[types.UID]podworker.WorkerReport{
			"1-normal": {Stage: podworker.StageSyncing, HasConfig: true},
			"2-static": {Stage: podworker.StageFinished, HasConfig: true, Static: true},
			"3-static": {Stage: podworker.StageFinished, HasConfig: true, Static: true},
			"4-static": {Stage: podworker.StageSyncing, HasConfig: true, Static: true},
		}, state)
		assert.True(t, r.info("3-static").Finished, "still desired: kept")

		// With 3-static no longer desired, it is forgotten.
		state = r.w.SyncKnownPods([]*v1.Pod{normal, static("2-static"), static("4-static")})
		assert.NotContains(t, state, types.UID("3-static"))
		assert.Len(t, state, 3)
		r.absent("3-static")

		// 5-static waits behind 4-static and is killed while waiting; then
		// 6-static waits. Killing 4-static starts 6-static, never 5-static.
		r.update(podworker.SyncPodUpdate, static("5-static"))
		r.settle()
		r.kill(static("5-static"), nil)
		r.update(podworker.SyncPodUpdate, static("6-static"))
		r.settle()
		assert.True(t, r.info("5-static").Finished)
		assert.Empty(t, r.trace("6-static"))
		r.kill(static("4-static"), nil)
		r.settle()
		assert.Equal(t, "sync:update kill(30) terminated", r.trace("4-static"))
		assert.Empty(t, r.trace("5-static"))
		assert.Equal(t, "sync:update", r.trace("6-static"))

		// Three more wait; the holder (6) is killed and recreated (restart
		// requested); 8-static gets an update first, but 7-static is first
		// in line.
		for _, uid := range []string{"7-static", "8-static", "9-static"} {
			r.update(podworker.SyncPodUpdate, static(uid))
		}
		r.settle()
		g6 := r.hold("6-static", podworker.HookSyncTerminatedPod)
		r.kill(static("6-static"), nil)
		r.entered(g6)
		r.update(podworker.SyncPodCreate, static("6-static"))
		r.update(podworker.SyncPodUpdate, static("8-static"))
		r.settle()
		assert.True(t, r.info("6-static").RestartRequested)
		for _, uid := range []types.UID{"7-static", "8-static", "9-static"} {
			assert.Empty(t, r.trace(uid))
		}
		g6.Release()
		r.settle()
		assert.Equal(t, "sync:update", r.trace("7-static"), "FIFO: 7-static starts first, by itself")
		assert.Empty(t, r.trace("8-static"))
		assert.Empty(t, r.trace("9-static"))

		// Kill 7-static: 8-static starts.
		r.kill(static("7-static"), nil)
		r.settle()
		assert.Equal(t, "sync:update", r.trace("8-static"))
		assert.Empty(t, r.trace("9-static"))

		// Only 8-static is still desired: finished and unstarted pods are
		// forgotten, 6-static (restart requested) too, and the running
		// orphans are terminated.
		state = r.w.SyncKnownPods([]*v1.Pod{static("8-static")})
		assert.Equal(t, map[types.UID]podworker.WorkerReport{
			"1-normal": {Stage: podworker.StageTerminationRequested, Orphan: true, HasConfig: true},
			"8-static": {Stage: podworker.StageSyncing, HasConfig: true, Static: true},
		}, state)
		r.settle()
		assert.Equal(t, "sync:update kill(30) terminated", r.trace("1-normal"))
		assert.Empty(t, r.trace("9-static"), "9-static was forgotten before it started")
		r.absent("9-static")
		r.absent("6-static")
		assert.Equal(t, 1, r.f.MaxInFlightPerUID())
	})
}

// Static pods of one full name start in arrival order, whatever order
// their updates come in.
func TestStaticPodFIFO(t *testing.T) {
	bubble(t, func(t *testing.T) {
		r := startRig(t, podworker.Options[struct{}]{})
		static := func(uid string) *v1.Pod { return mkStatic(uid, "web") }
		for _, uid := range []string{"a", "b", "c", "d"} {
			r.update(podworker.SyncPodCreate, static(uid))
		}
		r.settle()
		for _, uid := range []string{"d", "c", "d", "b"} {
			r.update(podworker.SyncPodUpdate, static(uid))
		}
		r.settle()
		started := func() []string {
			var out []string
			for _, uid := range []string{"a", "b", "c", "d"} {
				if r.f.Count(types.UID(uid), podworker.HookSyncPod) > 0 {
					out = append(out, uid)
				}
			}
			return out
		}
		assert.Equal(t, []string{"a"}, started())
		for i, next := range []string{"b", "c", "d"} {
			r.kill(static([]string{"a", "b", "c"}[i]), nil)
			r.settle()
			assert.Equal(t, []string{"a", "b", "c", "d"}[:i+2], started(), "after the kill of the holder, %s starts", next)
		}
		assert.Equal(t, "sync:update kill(30) terminated", r.trace("b"), "a waiting pod starts with its newest update")
		assert.Equal(t, "sync:create kill(30) terminated", r.trace("a"))
		assert.Equal(t, "sync:update", r.trace("d"))
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

// killPod runs KillPod in its own goroutine (so the test goroutine never
// blocks and fake time cannot jump) and returns where its result arrives.
func (r *rig) killPod(ctx context.Context, pod *v1.Pod, ko podworker.KillPodOptions) <-chan error {
	res := make(chan error, 1)
	go func() { res <- r.w.KillPod(ctx, pod, ko) }()
	return res
}

func requireNoResult(t *testing.T, res <-chan error) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-res:
		t.Fatalf("KillPod returned %v too early", err)
	default:
	}
}

// Upstream's TestKillPodNowFunc, and what KillPod waits for.
func TestKillPod(t *testing.T) {
	failed := func(s *v1.PodStatus) { s.Phase, s.Reason, s.Message = v1.PodFailed, "reason", "message" }
	t.Run("an override of 0 kills with 1 and hands over the status func", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			require.NoError(t, r.w.KillPod(r.ctx, p, podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(0), PodStatusFunc: failed}))
			r.settle()
			assert.Equal(t, "kill(1) terminated", r.trace("p"))
			fn := r.f.CallsFor("p")[0].PodStatusFunc
			require.NotNil(t, fn)
			var s v1.PodStatus
			fn(&s)
			assert.Equal(t, v1.PodFailed, s.Phase)
			assert.Equal(t, "reason", s.Reason)
		})
	})
	t.Run("it returns once the containers are stopped, not before, and not after cleanup", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			gTerm := r.hold("p", podworker.HookSyncTerminatingPod)
			gDone := r.hold("p", podworker.HookSyncTerminatedPod)
			res := r.killPod(r.ctx, p, podworker.KillPodOptions{})
			r.entered(gTerm)
			requireNoResult(t, res)
			gTerm.Release()
			r.entered(gDone)
			require.NoError(t, <-res)
			gDone.Release()
		})
	})
	t.Run("several callers all return, and the last status func wins", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			r.f.Next("p", podworker.HookSyncTerminatingPod, podworkertest.Result{Err: errBoom})
			first := r.killPod(r.ctx, p, podworker.KillPodOptions{PodStatusFunc: func(s *v1.PodStatus) { s.Reason = "first" }})
			r.entered(g)
			second := r.killPod(r.ctx, p, podworker.KillPodOptions{PodStatusFunc: func(s *v1.PodStatus) { s.Reason = "second" }})
			requireNoResult(t, first)
			requireNoResult(t, second)
			g.Release() // fails; the retry gets the newest status func
			time.Sleep(5 * time.Second)
			require.NoError(t, <-first)
			require.NoError(t, <-second)
			calls := r.f.CallsFor("p")
			require.Equal(t, "sync:create kill(30)=error kill(30) terminated", r.trace("p"))
			var s v1.PodStatus
			calls[2].PodStatusFunc(&s)
			assert.Equal(t, "second", s.Reason)
		})
	})
	t.Run("its ctx ending leaves the termination under way", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			ctx, cancel := context.WithCancel(context.Background())
			res := r.killPod(ctx, p, podworker.KillPodOptions{})
			r.entered(g)
			cancel()
			require.ErrorIs(t, <-res, context.Canceled)
			assert.True(t, r.w.IsPodTerminationRequested("p"))
			g.Release()
			r.settle()
			assert.Equal(t, "sync:create kill(30) terminated", r.trace("p"))
		})
	})
	t.Run("it returns at once for a pod that can no longer run", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := startRig(t, podworker.Options[struct{}]{})
			p := mkPod("p")
			r.started(p)
			r.kill(p, nil)
			r.settle()
			require.NoError(t, <-r.killPod(r.ctx, p, podworker.KillPodOptions{}), "finished")

			r.started(mkStatic("holder", "web"))
			require.NoError(t, <-r.killPod(r.ctx, mkStatic("waiting", "web"), podworker.KillPodOptions{}), "a static pod that never started")
			assert.Empty(t, r.trace("waiting"))
		})
	})
	t.Run("given before Run, it waits for Run", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			r := newRig(t, podworker.Options[struct{}]{})
			res := r.killPod(r.ctx, mkPod("p"), podworker.KillPodOptions{})
			requireNoResult(t, res)
			r.start()
			require.NoError(t, <-res)
			r.settle()
			assert.Equal(t, "kill(30) terminated", r.trace("p"))
		})
	})
}
