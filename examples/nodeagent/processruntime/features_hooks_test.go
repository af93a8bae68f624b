package processruntime_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/containerhook"
	"github.com/podkit/podkit/lifecycle/deadline"
	"github.com/podkit/podkit/podworker"
)

// execHook is an exec lifecycle handler of a shell script.
func execHook(script string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", script}}}
}

// A postStart hook runs in the container right after it started (the
// documentation's lifecycle-events: it writes a file the container then
// sees); one that fails kills the container, with the kubelet's
// FailedPostStartHook events, and the restart policy starts it again.
func TestPostStartHook(t *testing.T) {
	t.Parallel()
	e := newFeatureEnv(t)
	ok := featurePod("c", `exec sleep 600`)
	ok.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: execHook(`echo Hello from the postStart handler > /tmp/message`)}
	failing := featurePod("c", `exec sleep 600`)
	failing.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: execHook(`echo no; exit 3`)}
	e.run(ok, failing)

	e.waitRunning(ok, "c")
	eventually(t, 30*time.Second, "the hook wrote its file", func() bool {
		return e.execCode(ok, "c", "test", "-f", "/tmp/message") == 0
	})
	assert.Equal(t, "Hello from the postStart handler\n", e.exec(ok, "c", "cat", "/tmp/message"))

	e.waitEvent(failing, containerhook.ReasonFailedPostStartHook, "PostStartHook failed")
	e.waitEvent(failing, "Killing", containerhook.ReasonFailedPostStartHook)
	var exit *processruntime.ExitStatus
	eventually(t, 30*time.Second, "the container is restarted after its failed hook", func() bool {
		c, _ := status(t, e.rt, failing.UID).Container("c")
		exit = c.LastExit
		return c.RestartCount >= 1 && exit != nil
	})
	assert.Equal(t, "PostStartHookError", exit.Reason)
	assert.Contains(t, exit.Message, "exited with 3", "the hook's message is in the container's status")
	for _, ev := range e.rec.of(failing) {
		assert.NotContains(t, ev.message, "no\n", "a hook's output is in no event")
	}
}

// A preStop hook runs before the container is stopped, within the grace
// period: here it tells a container that ignores SIGTERM to finish, so it
// exits 0 instead of being killed at the end of its grace period.
func TestPreStopHookRunsBeforeTheStop(t *testing.T) {
	t.Parallel()
	e := newFeatureEnv(t)
	// $$$$ is the shell's $$: a container's args have their $$ turned
	// into $, as on a kubelet.
	pod := featurePod("c", `echo $$$$ > /tmp/main.pid; trap 'echo preStop ran; exit 0' USR1; trap '' TERM; while :; do sleep 0.1; done`)
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: execHook(`kill -USR1 $(cat /tmp/main.pid)`)}
	pod.Spec.TerminationGracePeriodSeconds = new(int64(20))
	e.run(pod)
	e.waitRunning(pod, "c")
	eventually(t, 10*time.Second, "the container set its traps", func() bool { return ignoringTerm(t, pod.UID, "c") })

	start := time.Now()
	e.run() // the pod is deleted
	eventually(t, 30*time.Second, "the pod stopped", func() bool { return status(t, e.rt, pod.UID).Stopped })
	assert.Less(t, time.Since(start), 15*time.Second, "the preStop hook ended it well within its 20 s grace period")
	c, _ := status(t, e.rt, pod.UID).Container("c")
	require.NotNil(t, c.Exit)
	assert.Equal(t, int32(0), c.Exit.Code, "its preStop hook made it exit, not SIGKILL: %+v", c.Exit)
}

// A pod active longer than its activeDeadlineSeconds is stopped and ends
// Failed with the kubelet's reason DeadlineExceeded, and its event.
func TestActiveDeadlineFailsThePod(t *testing.T) {
	t.Parallel()
	e := newFeatureEnv(t)
	pod := featurePod("c", `exec sleep 600`)
	pod.Spec.ActiveDeadlineSeconds = new(int64(2))
	e.run(pod)
	e.waitRunning(pod, "c")
	e.waitEvent(pod, deadline.Reason, deadline.Message)
	eventually(t, 30*time.Second, "the pod stopped", func() bool { return status(t, e.rt, pod.UID).Stopped })
	st := e.api(pod)
	assert.Equal(t, v1.PodFailed, st.Phase)
	assert.Equal(t, deadline.Reason, st.Reason)
	assert.Equal(t, deadline.Message, st.Message)
	info, ok := e.agent.Workers().Pod(pod.UID)
	require.True(t, ok)
	assert.Contains(t, []podworker.Stage{podworker.StageTerminated, podworker.StageFinished}, info.Stage)
}

// Without the per-pod features, a pod asking for what only they honour
// is refused with a reason, not run with the field ignored.
func TestWithoutFeaturesProbesHooksAndDeadlinesAreRefused(t *testing.T) {
	t.Parallel()
	rt := openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff})
	pod := newPod(v1.RestartPolicyAlways, "c", "sleep 1")
	pod.Spec.ActiveDeadlineSeconds = new(int64(5))
	pod.Spec.Containers[0].ReadinessProbe = fast(v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}})
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: execHook("true")}
	err := rt.ValidatePod(pod)
	require.ErrorIs(t, err, processruntime.ErrUnsupported)
	for _, want := range []string{"activeDeadlineSeconds", "readinessProbe", "lifecycle hooks"} {
		assert.True(t, strings.Contains(err.Error(), want), "%v names %s", err, want)
	}
}
