package podworker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// Static pods of one full name, one at a time, as upstream's
// TestStaticPodExclusion and TestStaticPodFIFO have it.

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
