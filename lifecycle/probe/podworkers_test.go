package probe

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/podworker"
)

// The manager wired to the real pod workers, by UID through their window
// and nothing else: its syncer is the runtime, which reports statuses to
// the manager and kills what ShouldRestart names; a failing liveness
// probe asks for a sync (Resync, the engine's way in for runtime events),
// which restarts the container; the pod's termination stops the liveness
// probe; its end drops every probe.
func TestWithThePodWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m *Manager
		var workers *podworker.PodWorkers[struct{}]
		run := 1
		restarts := make(chan string, 4)
		syncer := podworker.PodSyncerFuncs[struct{}]{
			SyncPodFunc: func(_ context.Context, _ podworker.UpdateType, pod, _ *v1.Pod, _ struct{}) (bool, error) {
				id := func() string { return "cri://run" + string(rune('0'+run)) }
				if r, ok := m.ShouldRestart(pod, "app", id()); ok {
					restarts <- r.Message
					run++
				}
				return false, m.UpdatePodStatus(pod, runningStatus(pod, map[string]string{"app": id()}, t0))
			},
			SyncTerminatingPodFunc: func(context.Context, *v1.Pod, struct{}, int64, func(*v1.PodStatus)) error { return nil },
			SyncTerminatedPodFunc: func(_ context.Context, pod *v1.Pod, _ struct{}) error {
				m.RemovePod(pod.UID)
				return nil
			},
		}
		var err error
		workers, err = podworker.New[struct{}](syncer, podworker.Options[struct{}]{})
		require.NoError(t, err)
		clk := clocktesting.NewFakeClock(t0)
		exec := &fakeExec{}
		exec.exit(1, "dead")
		m, err = New(workers, Options{Exec: exec, Clock: clk, RequestSync: func(uid types.UID) { workers.Resync(uid) }})
		require.NoError(t, err)
		m.jitter = func(time.Duration) time.Duration { return 0 }

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = workers.Run(ctx) }()
		go func() { _ = m.Run(ctx) }()

		pod := podWith(func(c *v1.Container) { c.LivenessProbe = execProbe(10, 1, 1) })
		require.NoError(t, workers.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
		assert.Equal(t, "Container app failed liveness probe", <-restarts, "the failure came back through Resync to SyncPod")
		synctest.Wait()
		exec.exit(0, "")
		clk.Step(10 * time.Second)
		synctest.Wait()
		_, ok := m.ShouldRestart(pod, "app", "cri://run2")
		assert.False(t, ok, "the new run passes")

		before := exec.count()
		require.NoError(t, workers.KillPod(ctx, pod, podworker.KillPodOptions{}))
		synctest.Wait()
		clk.Step(10 * time.Second)
		synctest.Wait()
		assert.Equal(t, before, exec.count(), "no probing once the pod may not run")
		assert.Zero(t, m.sched.Len())
		cancel()
	})
}
