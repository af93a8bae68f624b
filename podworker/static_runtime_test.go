package podworker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/podworker"
)

// A UID first seen as a runtime-only pod, then killed with its static pod
// before its worker ran, must neither start (another static pod holds its
// full name) nor leak its containers: it is stopped through
// SyncTerminatingRuntimePod, and the holder is never overlapped. The model
// test found this order of events.
func TestStaticPodSeenFirstInRuntimeIsStoppedAsAnOrphan(t *testing.T) {
	bubble(t, func(t *testing.T) {
		// One hook at a time, and the holder's SyncPod held, so that both
		// updates of the late pod wait and coalesce before its worker runs.
		r := startRig(t, podworker.Options[struct{}]{MaxConcurrentSyncs: 1})
		holder := mkStatic("holder", "web")
		hg := r.hold("holder", podworker.HookSyncPod)
		r.update(podworker.SyncPodCreate, holder)
		r.entered(hg)

		late := mkStatic("late", "web")
		g := r.hold("late", podworker.HookSyncTerminatingRuntimePod)
		r.send(podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, RunningPod: &podworker.RuntimePod{UID: "late", Name: "web", Namespace: "ns"}})
		r.kill(late, nil)
		hg.Release()
		r.entered(g)
		require.Equal(t, "sync:create", r.trace("holder"))

		info := r.info("late")
		assert.False(t, info.Started, "the late static pod never starts")
		assert.True(t, r.w.CouldHaveRunningContainers("late"))
		assert.False(t, r.w.IsPodForMirrorPodTerminatingByFullName("web_ns"), "the holder is not terminating")
		g.Release()
		r.settle()

		assert.Equal(t, "kill-runtime", r.trace("late"))
		r.absent("late")
		assert.Equal(t, "sync:create", r.trace("holder"), "the holder was left alone")
		assert.Equal(t, podworker.StageSyncing, r.info("holder").Stage)
	})
}
