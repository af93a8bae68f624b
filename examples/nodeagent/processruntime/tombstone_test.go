package processruntime_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// finishInEarlierRun plays an earlier run of the agent on dir: a runtime
// starts pod, waits for each of its containers to exit once, stops and
// cleans the pod up (so only its tombstone is left) and closes. Nothing is
// restarted in that run, whatever the restart policy.
func finishInEarlierRun(t *testing.T, dir string, pod *v1.Pod) {
	t.Helper()
	ev := newEvents()
	rt, err := processruntime.Open(processruntime.Options{StateDir: dir, OnEvent: ev.add})
	require.NoError(t, err)
	defer rt.Close()
	_, err = syncPod(rt, pod)
	require.NoError(t, err)
	for _, c := range pod.Spec.Containers {
		ev.wait(t, "exit of "+c.Name, exitedEvent(pod.UID, c.Name, 1))
	}
	terminate(t, rt, pod, 1)
	require.Equal(t, []podworker.RuntimePod{{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}}, rt.Tombstones())
	require.NoError(t, rt.Close())
}

func started(uid types.UID) func(processruntime.Event) bool {
	return func(e processruntime.Event) bool { return e.UID == uid && e.Type == processruntime.ContainerStarted }
}

func readLog(t *testing.T, rt *processruntime.Runtime, uid types.UID, container string) string {
	t.Helper()
	var log strings.Builder
	require.NoError(t, rt.ReadLogs(context.Background(), uid, container, processruntime.LogOptions{}, &log), "the log of container %s", container)
	return log.String()
}

func TestSyncTerminatedPodKeepsLogsAndFinalStatesUntilPruned(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "c", "echo the job ran; exit 3")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	ev.wait(t, "exit", exitedEvent(pod.UID, "c", 1))
	terminal, err := syncPod(rt, pod)
	require.NoError(t, err)
	require.True(t, terminal)
	require.DirExists(t, filepath.Join(rt.PodDir(pod.UID), "scratch"))

	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 5, nil))
	for i := range 2 {
		require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}), "call %d", i+1)
		assert.NoDirExists(t, filepath.Join(rt.PodDir(pod.UID), "scratch"), "the scratch directory is released")
		assert.Equal(t, "the job ran\n", readLog(t, rt, pod.UID, "c"), "the log outlives the cleanup")
		assert.Empty(t, rt.RuntimePods(), "a tombstone is nothing for housekeeping to kill")
		assert.Equal(t, []podworker.RuntimePod{{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}}, rt.Tombstones())
		st := status(t, rt, pod.UID)
		assert.True(t, st.Stopped)
		assert.True(t, rt.NothingRunning(st))
		c, ok := st.Container("c")
		require.True(t, ok, "the final container state is kept")
		assert.Equal(t, processruntime.ContainerStateExited, c.State)
		assert.Equal(t, int32(3), c.Exit.Code)
		assert.Equal(t, v1.PodFailed, processruntime.APIStatus(pod, st).Phase)
	}

	removed, err := rt.PruneTombstones(func(types.UID) bool { return true })
	require.NoError(t, err)
	assert.Empty(t, removed, "config still has the pod")
	assert.NotEmpty(t, readLog(t, rt, pod.UID, "c"))

	removed, err = rt.PruneTombstones(func(uid types.UID) bool { return uid != pod.UID })
	require.NoError(t, err)
	assert.Equal(t, []types.UID{pod.UID}, removed)
	assert.NoDirExists(t, rt.PodDir(pod.UID), "the pod left config: its logs go")
	assert.Empty(t, rt.Tombstones())
	st := status(t, rt, pod.UID)
	assert.Empty(t, st.Containers, "the runtime forgot the pod")
	assert.True(t, rt.NothingRunning(st))
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}), "still idempotent once pruned")
}

func TestSyncTerminatedPodRefusesARunningPod(t *testing.T) {
	t.Parallel()
	rt := openRuntime(t, processruntime.Options{})
	pod := newPod(v1.RestartPolicyAlways, "c", "exec sleep 300")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	err = rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{})
	require.ErrorContains(t, err, "still has a running container")
	require.DirExists(t, filepath.Join(rt.PodDir(pod.UID), "scratch"), "nothing is removed while the pod runs")
	assert.Empty(t, rt.Tombstones())
	removed, err := rt.PruneTombstones(func(types.UID) bool { return false })
	require.NoError(t, err)
	assert.Empty(t, removed, "only tombstones are pruned")
	require.DirExists(t, rt.PodDir(pod.UID))
	terminate(t, rt, pod, 5)
	assert.Empty(t, processes(t, pod.UID))
}

func TestARestartedUIDStartsCleanInTheSameRun(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "c", "echo ran; echo left > here")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	ev.wait(t, "exit", exitedEvent(pod.UID, "c", 1))
	terminate(t, rt, pod, 1)

	// The engine syncs the UID again only to restart it (the pod was
	// removed from config and added back): it runs again, from scratch.
	_, err = syncPod(rt, pod) // terminal already if echo was quick
	require.NoError(t, err)
	ev.wait(t, "the second exit", exitedEvent(pod.UID, "c", 2))
	assert.Equal(t, 2, ev.count(started(pod.UID)))
	assert.Equal(t, "ran\n", readLog(t, rt, pod.UID, "c"), "the restarted UID has a fresh log")
	c, _ := status(t, rt, pod.UID).Container("c")
	assert.Zero(t, c.RestartCount, "and a fresh history")
	assert.Empty(t, rt.Tombstones())
	terminate(t, rt, pod, 1)
}

// An agent restart is a Close and an Open on the same state directory: a
// pod that finished under its restart policy is not run again, a
// container due for a restart is restarted.
func TestAnAgentRestartDoesNotRunAFinishedPodAgain(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		policy   v1.RestartPolicy
		script   string
		terminal bool
		phase    v1.PodPhase
	}{
		{"job succeeded", v1.RestartPolicyNever, "echo ran", true, v1.PodSucceeded},
		{"job failed", v1.RestartPolicyNever, "echo ran; exit 3", true, v1.PodFailed},
		{"OnFailure succeeded", v1.RestartPolicyOnFailure, "echo ran", true, v1.PodSucceeded},
		{"OnFailure failed", v1.RestartPolicyOnFailure, "echo ran; exit 3", false, ""},
		{"Always", v1.RestartPolicyAlways, "echo ran", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pod := newPod(tc.policy, "c", tc.script)
			finishInEarlierRun(t, dir, pod)

			ev := newEvents()
			rt := openRuntime(t, processruntime.Options{StateDir: dir, OnEvent: ev.add})
			assert.Empty(t, rt.RuntimePods())
			st := status(t, rt, pod.UID)
			assert.True(t, st.Stopped, "the status source reports the tombstone stopped")
			assert.True(t, rt.NothingRunning(st))

			terminal, err := syncPod(rt, pod)
			if err != nil {
				// Restarted at once, and already exited again.
				require.False(t, tc.terminal)
				require.ErrorIs(t, err, processruntime.ErrBackOff)
			}
			require.Equal(t, tc.terminal, terminal)
			if tc.terminal {
				terminal, err = syncPod(rt, pod)
				require.NoError(t, err)
				assert.True(t, terminal, "SyncPod stays terminal")
				assert.Zero(t, ev.count(started(pod.UID)), "no process was started")
				assert.Empty(t, processes(t, pod.UID))
				assert.Equal(t, "ran\n", readLog(t, rt, pod.UID, "c"), "the log was not appended to")
				assert.Equal(t, tc.phase, processruntime.APIStatus(pod, status(t, rt, pod.UID)).Phase)
				assert.Equal(t, []podworker.RuntimePod{{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}}, rt.Tombstones())
				terminate(t, rt, pod, 1)
				assert.Equal(t, "ran\n", readLog(t, rt, pod.UID, "c"))
				return
			}
			// Restarted at once, as the first restart is; the restart count
			// goes on from the earlier run.
			ev.wait(t, "the restart", func(e processruntime.Event) bool {
				return started(pod.UID)(e) && e.Status.Containers[0].RestartCount == 1
			})
			ev.wait(t, "the restarted container's exit", exitedEvent(pod.UID, "c", 1))
			assert.Equal(t, "ran\n", readLog(t, rt, pod.UID, "c"), "the restarted instance's log")
			var previous strings.Builder
			require.NoError(t, rt.ReadLogs(context.Background(), pod.UID, "c", processruntime.LogOptions{Previous: true}, &previous))
			assert.Equal(t, "ran\n", previous.String(), "the earlier run's instance is the previous one")
			assert.DirExists(t, filepath.Join(rt.PodDir(pod.UID), "scratch"))
			assert.Empty(t, rt.Tombstones(), "the pod lives again")
			assert.Len(t, rt.RuntimePods(), 1)
			terminate(t, rt, pod, 1)
		})
	}
}

func TestAnAgentRestartRunsAPodKilledWhileRunningAgainUnderAlways(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pod := newPod(v1.RestartPolicyAlways, "c", "exec sleep 300")
	ev := newEvents()
	earlier, err := processruntime.Open(processruntime.Options{StateDir: dir, OnEvent: ev.add})
	require.NoError(t, err)
	_, err = syncPod(earlier, pod)
	require.NoError(t, err)
	ev.wait(t, "start", started(pod.UID))
	terminate(t, earlier, pod, 1) // as a node shutdown does
	require.NoError(t, earlier.Close())

	ev = newEvents()
	rt := openRuntime(t, processruntime.Options{StateDir: dir, OnEvent: ev.add})
	terminal, err := syncPod(rt, pod)
	require.NoError(t, err)
	require.False(t, terminal)
	ev.wait(t, "the restart", started(pod.UID))
	c, _ := status(t, rt, pod.UID).Container("c")
	assert.Equal(t, processruntime.ContainerStateRunning, c.State)
	assert.Equal(t, int32(1), c.RestartCount)
	require.NotNil(t, c.LastExit)
	assert.Equal(t, int32(143), c.LastExit.Code, "the earlier run stopped it with SIGTERM")
	terminate(t, rt, pod, 1)
	assert.Empty(t, processes(t, pod.UID))
}

func TestAPodRecreatedUnderANewUIDStartsFresh(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := newPod(v1.RestartPolicyNever, "c", "echo ran")
	finishInEarlierRun(t, dir, first)

	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{StateDir: dir, OnEvent: ev.add})
	second := first.DeepCopy()
	second.UID = first.UID + "-again"
	_, err := syncPod(rt, second) // terminal already if echo was quick
	require.NoError(t, err)
	ev.wait(t, "exit", exitedEvent(second.UID, "c", 1))
	assert.Equal(t, 1, ev.count(started(second.UID)))
	assert.Equal(t, "ran\n", readLog(t, rt, second.UID, "c"))
	c, _ := status(t, rt, second.UID).Container("c")
	assert.Zero(t, c.RestartCount)
	terminal, err := syncPod(rt, second)
	require.NoError(t, err)
	require.True(t, terminal)
	terminate(t, rt, second, 1)

	// Config now has the new pod only: the old one's logs go.
	removed, err := rt.PruneTombstones(func(uid types.UID) bool { return uid == second.UID })
	require.NoError(t, err)
	assert.Equal(t, []types.UID{first.UID}, removed)
	assert.NoDirExists(t, rt.PodDir(first.UID))
	assert.Equal(t, "ran\n", readLog(t, rt, second.UID, "c"))
}

// Through the pod workers, after an agent restart: a static pod (no
// status in config) is synced, reported terminal and stopped without a
// process being started; a pod config already shows Succeeded skips
// SyncTerminatingPod, as the status source reports it stopped. Either way,
// restarting the UID later in the same run starts it clean.
func TestAnAgentRestartThroughThePodWorkers(t *testing.T) {
	t.Parallel()
	for _, phase := range []v1.PodPhase{"", v1.PodSucceeded} {
		name := "no phase in config"
		if phase != "" {
			name = "config says " + string(phase)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pod := newPod(v1.RestartPolicyNever, "c", "echo ran")
			finishInEarlierRun(t, dir, pod)

			ev := newEvents()
			rt := openRuntime(t, processruntime.Options{StateDir: dir, OnEvent: ev.add})
			w, err := podworker.New[processruntime.PodStatus](rt, podworker.Options[processruntime.PodStatus]{Status: rt})
			require.NoError(t, err)
			podworkertest.Start(t, w)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			desired := pod.DeepCopy()
			desired.Status.Phase = phase
			require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: desired}))
			_, err = podworkertest.WaitForStage(ctx, w, pod.UID, podworker.StageFinished)
			require.NoError(t, err)
			assert.Zero(t, ev.count(started(pod.UID)), "the finished pod did not run again")
			assert.Equal(t, "ran\n", readLog(t, rt, pod.UID, "c"))
			stopped := ev.count(func(e processruntime.Event) bool { return e.UID == pod.UID && e.Type == processruntime.PodStopped })
			if phase == "" {
				assert.Equal(t, 1, stopped, "SyncPod reported the pod terminal, then SyncTerminatingPod stopped it")
			} else {
				assert.Zero(t, stopped, "SyncTerminatingPod was skipped")
			}
			assert.Equal(t, v1.PodSucceeded, processruntime.APIStatus(pod, status(t, rt, pod.UID)).Phase)

			// The pod is removed from config and added back: a restart.
			w.SyncKnownPods(nil)
			_, err = podworkertest.WaitForStage(ctx, w, pod.UID, podworker.StageAbsent)
			require.NoError(t, err)
			require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
			ev.wait(t, "the restarted UID's run", exitedEvent(pod.UID, "c", 1))
			// As the agent does on a container exit (the PLEG).
			require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodSync, Pod: pod}))
			_, err = podworkertest.WaitForStage(ctx, w, pod.UID, podworker.StageFinished)
			require.NoError(t, err)
			assert.Equal(t, 1, ev.count(started(pod.UID)))
			assert.Equal(t, "ran\n", readLog(t, rt, pod.UID, "c"), "a fresh log")
		})
	}
}
