package processruntime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// debugger is an ephemeral container as kubectl debug -it adds it.
func debugger(name, target string, command ...string) v1.EphemeralContainer {
	return v1.EphemeralContainer{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name: name, Image: "busybox", Command: command,
			Stdin: true, StdinOnce: true, TTY: true,
		},
		TargetContainerName: target,
	}
}

// An ephemeral container added to a running pod is started at its next
// sync, in its target's view, with its terminal held for kubectl debug
// -it to attach to; it is reported (never ready), and once it exits it is
// never started again, while the pod runs on.
func TestAnEphemeralContainerRunsInARunningPod(t *testing.T) {
	t.Parallel()
	rt := sandboxed(t, processruntime.Options{})
	pod := execPod()
	waitRunning(t, rt, pod, "c")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	eventually(t, 10*time.Second, "the container wrote its marker", func() bool {
		return runExec(t, rt, pod.UID, "c", "", "cat", "/data/marker").code == 0
	})

	debug := pod.DeepCopy()
	debug.Spec.EphemeralContainers = []v1.EphemeralContainer{
		debugger("debugger", "c", "sh", "-c", `read line; echo "$line: $(cat /data/marker) as $(id -u)"; touch /x 2>/dev/null || echo root-read-only`),
	}
	waitRunning(t, rt, debug, "debugger")
	st := status(t, rt, debug.UID)
	require.Len(t, st.EphemeralContainers, 1)
	api := processruntime.APIStatus(debug, st)
	require.Len(t, api.EphemeralContainerStatuses, 1)
	es := api.EphemeralContainerStatuses[0]
	assert.Equal(t, "debugger", es.Name)
	assert.NotNil(t, es.State.Running)
	assert.False(t, es.Ready, "an ephemeral container is never ready")
	assert.Len(t, api.ContainerStatuses, 1, "nor one of the pod's containers")
	assert.True(t, api.ContainerStatuses[0].Ready)

	a := startAttach(t, rt, debug.UID, "debugger", true, true)
	a.resize <- processruntime.TerminalSize{Width: 80, Height: 24}
	a.typeIn(t, "debugging\r")
	a.out.waitFor(t, "debugging: from-the-container as 0")
	a.out.waitFor(t, "root-read-only")
	require.NoError(t, a.wait(t).err, "the session ends with the container")
	eventually(t, 10*time.Second, "the ephemeral container exited", func() bool {
		c, _ := status(t, rt, debug.UID).Container("debugger")
		return c.State == processruntime.ContainerStateExited
	})
	terminal, err := syncPod(rt, debug)
	require.NoError(t, err)
	assert.False(t, terminal, "the pod runs on")
	c, _ := status(t, rt, debug.UID).Container("debugger")
	assert.Equal(t, processruntime.ContainerStateExited, c.State, "never started again")
	assert.Zero(t, c.RestartCount)
	es = processruntime.APIStatus(debug, status(t, rt, debug.UID)).EphemeralContainerStatuses[0]
	require.NotNil(t, es.State.Terminated)
	assert.Equal(t, int32(0), es.State.Terminated.ExitCode)
	logs := readLogs(t, rt, debug.UID, "debugger", processruntime.LogOptions{})
	assert.Contains(t, logs, "debugging: from-the-container as 0")
}

// What the runtime cannot run in an ephemeral container makes it wait,
// with the reason, instead of failing the running pod.
func TestAnEphemeralContainerItCannotRunWaits(t *testing.T) {
	t.Parallel()
	rt := sandboxed(t, processruntime.Options{})
	pod := newPod(v1.RestartPolicyNever, "c", "exec sleep 1000")
	waitRunning(t, rt, pod, "c")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })

	debug := pod.DeepCopy()
	noCommand := debugger("no-command", "")
	noCommand.Image = "example.com/unknown-debugger" // in no image table: its command is unknown
	privileged := debugger("privileged", "", "true")
	privileged.SecurityContext = &v1.SecurityContext{Privileged: new(true)}
	withVolume := debugger("own-volume", "c", "true")
	withVolume.VolumeMounts = []v1.VolumeMount{{Name: "missing", MountPath: "/m"}}
	debug.Spec.EphemeralContainers = []v1.EphemeralContainer{noCommand, privileged, withVolume}
	terminal, err := syncPod(rt, debug)
	require.NoError(t, err, "the pod itself is fine")
	assert.False(t, terminal)
	api := processruntime.APIStatus(debug, status(t, rt, debug.UID))
	require.Len(t, api.EphemeralContainerStatuses, 3)
	for _, es := range api.EphemeralContainerStatuses {
		require.NotNil(t, es.State.Waiting, es.Name)
		assert.Equal(t, processruntime.ReasonCreateContainerConfigError, es.State.Waiting.Reason, es.Name)
	}
	msgs := map[string]string{}
	for _, es := range api.EphemeralContainerStatuses {
		msgs[es.Name] = es.State.Waiting.Message
	}
	assert.Contains(t, msgs["no-command"], `image "example.com/unknown-debugger" is not in this node's image table`)
	assert.Contains(t, msgs["privileged"], "privileged")
	assert.Contains(t, msgs["own-volume"], `names no volume`)
	c, _ := status(t, rt, debug.UID).Container("c")
	assert.Equal(t, processruntime.ContainerStateRunning, c.State)
}
