package processruntime_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// sidecar returns an init container with restartPolicy Always running
// script.
func sidecar(name, script string) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	return v1.Container{Name: name, Image: "example.com/" + name, Command: []string{"sh", "-c", script}, RestartPolicy: &always}
}

func initContainer(name, script string) v1.Container {
	return v1.Container{Name: name, Image: "example.com/" + name, Command: []string{"sh", "-c", script}}
}

// slowToStop catches SIGTERM and exits 0.3s after it.
const slowToStop = `trap 'sleep 0.3; exit 0' TERM; sleep 300 & wait`

// startedOrder lists the containers of uid in the order of their
// ContainerStarted events.
func startedOrder(ev *events, uid types.UID) []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []string
	for _, e := range ev.list {
		if e.UID == uid && e.Type == processruntime.ContainerStarted {
			out = append(out, e.Container)
		}
	}
	return out
}

// exitOrder lists the containers of uid in the order of their
// ContainerExited events.
func exitOrder(ev *events, uid types.UID) []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []string
	for _, e := range ev.list {
		if e.UID == uid && e.Type == processruntime.ContainerExited {
			out = append(out, e.Container)
		}
	}
	return out
}

// catchesTerm reports whether the process catches SIGTERM (a trap is set).
func catchesTerm(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(syscall.SIGTERM-1)) != 0
		}
	}
	return false
}

// syncUntil syncs pod, and again after each exit of its containers, until
// done holds after a sync (given its terminal result); it returns the last
// sync's terminal.
func syncUntil(t *testing.T, rt *processruntime.Runtime, ev *events, pod *v1.Pod, done func(terminal bool) bool) bool {
	t.Helper()
	exits := func(e processruntime.Event) bool { return e.UID == pod.UID && e.Type == processruntime.ContainerExited }
	for range 20 {
		n := ev.count(exits)
		terminal, err := syncPod(rt, pod)
		if err != nil {
			require.ErrorIs(t, err, processruntime.ErrBackOff)
		}
		if done(terminal) {
			return terminal
		}
		ev.wait(t, "an exit", func(processruntime.Event) bool { return ev.countLocked(exits) > n })
	}
	t.Fatal("not done after 20 syncs")
	return false
}

func runningPID(t *testing.T, rt *processruntime.Runtime, uid types.UID, name string) int {
	t.Helper()
	c, ok := status(t, rt, uid).Container(name)
	require.True(t, ok, name)
	require.Equal(t, processruntime.ContainerStateRunning, c.State, name)
	return c.PID
}

// A Job's pod with a sidecar succeeds once its main container does: the
// sidecar, started before the init container after it, keeps running
// beside the main container, does not hold the pod's end back, and is
// stopped by the termination that follows. Its status is the kubelet's:
// started and ready while it runs.
func TestSidecarJobSucceeds(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "job", "exit 0")
	pod.Spec.InitContainers = []v1.Container{sidecar("proxy", "exec sleep 300"), initContainer("setup", "true")}

	syncUntil(t, rt, ev, pod, func(terminal bool) bool { return terminal })
	assert.Equal(t, int32(0), nthExit(t, ev, pod.UID, "job", 1).Code, "the main container completed: the pod is done, its sidecar running")
	assert.Equal(t, []string{"proxy", "setup", "job"}, startedOrder(ev, pod.UID))

	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	proxy := api.InitContainerStatuses[0]
	require.NotNil(t, proxy.State.Running, "the sidecar still runs")
	assert.True(t, *proxy.Started)
	assert.True(t, proxy.Ready)
	setup := api.InitContainerStatuses[1]
	require.NotNil(t, setup.State.Terminated)
	assert.True(t, setup.Ready, "a completed init container is ready")

	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 10, nil))
	assert.Empty(t, processes(t, pod.UID))
	api = processruntime.APIStatus(pod, status(t, rt, pod.UID))
	assert.Equal(t, v1.PodSucceeded, api.Phase, "the sidecar's exit by SIGTERM does not fail the pod")
	proxy = api.InitContainerStatuses[0]
	require.NotNil(t, proxy.State.Terminated)
	assert.False(t, proxy.Ready)
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
}

// Sidecars start in order, each before the next init container; at
// termination the main container stops first, then the sidecars in
// reverse order, each only once the one before has exited.
func TestSidecarsStartInOrderAndStopLast(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyAlways, "app", slowToStop)
	pod.Spec.InitContainers = []v1.Container{sidecar("first", "exec sleep 300"), sidecar("second", slowToStop), initContainer("init", "true")}
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	assert.Equal(t, []string{"first", "second", "init"}, startedOrder(ev, pod.UID)[:3], "one SyncPod starts the sidecars in order, then the init container")
	syncUntil(t, rt, ev, pod, func(bool) bool { return len(startedOrder(ev, pod.UID)) == 4 })
	assert.Equal(t, []string{"first", "second", "init", "app"}, startedOrder(ev, pod.UID))
	for _, name := range []string{"app", "second"} {
		pid := runningPID(t, rt, pod.UID, name)
		eventually(t, 5*time.Second, name+" traps SIGTERM", func() bool { return catchesTerm(pid) })
	}

	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 30, nil))
	assert.Equal(t, []string{"init", "app", "second", "first"}, exitOrder(ev, pod.UID),
		"the main container exits first (though slow to), then the sidecars in reverse order (the second slow to)")
	for _, name := range []string{"app", "second"} {
		c, _ := status(t, rt, pod.UID).Container(name)
		assert.Equal(t, int32(0), c.Exit.Code, "%s stopped within the grace period, by its trap", name)
	}
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
}

// A sidecar that exits is restarted whatever the pod's restartPolicy,
// with the restart backoff, while the main container runs on.
func TestSidecarRestartedUnderRestartPolicyNever(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, BackOff: time.Minute})
	pod := newPod(v1.RestartPolicyNever, "app", "exec sleep 300")
	pod.Spec.InitContainers = []v1.Container{sidecar("logger", "exec sleep 300")}
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	appPID := runningPID(t, rt, pod.UID, "app")

	require.NoError(t, syscall.Kill(runningPID(t, rt, pod.UID, "logger"), syscall.SIGKILL))
	assert.Equal(t, int32(137), nthExit(t, ev, pod.UID, "logger", 1).Code)
	terminal, err := syncPod(rt, pod)
	require.NoError(t, err, "the first restart is immediate")
	require.False(t, terminal)
	c, _ := status(t, rt, pod.UID).Container("logger")
	assert.Equal(t, processruntime.ContainerStateRunning, c.State)
	assert.Equal(t, int32(1), c.RestartCount)
	assert.Equal(t, appPID, runningPID(t, rt, pod.UID, "app"), "the main container is left alone")

	require.NoError(t, syscall.Kill(c.PID, syscall.SIGKILL))
	nthExit(t, ev, pod.UID, "logger", 2)
	_, err = syncPod(rt, pod)
	require.ErrorIs(t, err, processruntime.ErrBackOff)
	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	logger := api.InitContainerStatuses[0]
	require.NotNil(t, logger.State.Waiting, "%+v", logger.State)
	assert.Equal(t, processruntime.ReasonCrashLoopBackOff, logger.State.Waiting.Reason)
	assert.False(t, logger.Ready)
	assert.Equal(t, v1.PodRunning, api.Phase)
	terminate(t, rt, pod, 1)
}

// Before the pod is initialized, a sidecar that exits holds back the init
// containers after it until it runs again: here one whose program does not
// exist, so it never runs.
func TestExitedSidecarHoldsInitializationBack(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, BackOff: time.Minute})
	pod := newPod(v1.RestartPolicyNever, "app", "exec sleep 300")
	broken := sidecar("broken", "")
	broken.Command = []string{"no-such-sidecar-program"}
	pod.Spec.InitContainers = []v1.Container{broken, initContainer("init", "true")}
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	nthExit(t, ev, pod.UID, "broken", 1)
	_, err = syncPod(rt, pod)
	require.ErrorIs(t, err, processruntime.ErrBackOff, "restarted once at once (whatever restartPolicy Never says), then backing off")
	nthExit(t, ev, pod.UID, "broken", 2)
	assert.Empty(t, startedOrder(ev, pod.UID), "nothing after the sidecar started")

	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	assert.Equal(t, v1.PodPending, api.Phase)
	require.NotNil(t, api.InitContainerStatuses[0].State.Waiting)
	assert.Equal(t, processruntime.ReasonCrashLoopBackOff, api.InitContainerStatuses[0].State.Waiting.Reason)
	require.NotNil(t, api.InitContainerStatuses[1].State.Waiting)
	assert.Equal(t, processruntime.ReasonPodInitializing, api.InitContainerStatuses[1].State.Waiting.Reason)
	terminate(t, rt, pod, 1)
}
