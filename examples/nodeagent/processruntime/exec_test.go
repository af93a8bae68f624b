package processruntime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// execPod is a pod whose container "c" runs as user 1000 with a
// read-only root, an env var, an emptyDir at /data (its working
// directory), where it leaves a marker and its PID in the pod, then
// sleeps as its only process.
func execPod() *v1.Pod {
	pod := newPod(v1.RestartPolicyNever, "c", `echo from-the-container > /data/marker; echo $$ > /data/pid; exec sleep 1000`)
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	c.WorkingDir = "/data"
	c.Env = []v1.EnvVar{{Name: "GREETING", Value: "hello from the spec"}}
	c.SecurityContext = &v1.SecurityContext{RunAsUser: new(int64(1000)), ReadOnlyRootFilesystem: new(true)}
	return pod
}

// An exec runs as its container does: its user, working directory, env,
// volume, read-only root, and the very namespaces (mount, PID, network)
// and cgroup of its main process; the command's exit code comes back,
// and its input is the client's until it ends.
func TestExecRunsAsTheContainerRuns(t *testing.T) {
	t.Parallel()
	rt := sandboxed(t, processruntime.Options{})
	pod := execPod()
	waitRunning(t, rt, pod, "c")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	eventually(t, 10*time.Second, "the container wrote its PID", func() bool {
		return runExec(t, rt, pod.UID, "c", "", "cat", "/data/pid").code == 0
	})

	r := runExec(t, rt, pod.UID, "c", "", "sh", "-c", `id -u; pwd; echo "$GREETING"; cat marker; touch /x 2>/dev/null || echo root-read-only
		main=$(cat /data/pid)
		for ns in mnt pid net; do [ "$(readlink /proc/self/ns/$ns)" = "$(readlink /proc/$main/ns/$ns)" ] && echo same-$ns; done
		[ "$(cat /proc/self/cgroup)" = "$(cat /proc/$main/cgroup)" ] && echo same-cgroup
		echo to-stderr >&2; exit 3`)
	require.NoError(t, r.err)
	assert.Equal(t, 3, r.code, "the command's exit code")
	assert.Equal(t, "1000\n/data\nhello from the spec\nfrom-the-container\nroot-read-only\nsame-mnt\nsame-pid\nsame-net\nsame-cgroup\n", r.out)
	assert.Equal(t, "to-stderr\n", r.errOut)

	r = runExec(t, rt, pod.UID, "c", "typed by the client\n", "cat")
	require.NoError(t, r.err)
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "typed by the client\n", r.out, "stdin reaches the command, and its end ends cat")

	r = runExec(t, rt, pod.UID, "c", "", "sh", "-c", "kill -9 $$")
	require.NoError(t, r.err)
	assert.Equal(t, 137, r.code, "a signal's code is 128+n")

	r = runExec(t, rt, pod.UID, "c", "", "no-such-command")
	assert.ErrorContains(t, r.err, `command "no-such-command" not found in PATH`)

	r = runExec(t, rt, pod.UID, "nobody", "", "true")
	assert.ErrorIs(t, r.err, processruntime.ErrNotFound)
	r = runExec(t, rt, pod.UID, "c", "")
	assert.ErrorContains(t, r.err, "no command")
	assert.Len(t, processesOf(t, pod.UID, "c"), 1, "no exec is left in the container")
}

// With a terminal, an exec gets one opened in its pod, of the client's
// size, as its controlling terminal; its output, echo included, is one
// stream.
func TestExecWithATerminal(t *testing.T) {
	t.Parallel()
	rt := sandboxed(t, processruntime.Options{})
	pod := execPod()
	waitRunning(t, rt, pod, "c")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })

	s := startExec(t, rt, pod.UID, "c", true, true, "sh", "-c", `tty; stty size; read line; echo "got $line"; exit 5`)
	s.resize <- processruntime.TerminalSize{Width: 100, Height: 30}
	s.out.waitFor(t, "30 100\r\n") // the client's first size, before the command ran
	s.typeIn(t, "typed\r")
	end := s.wait(t)
	require.NoError(t, end.err)
	assert.Equal(t, 5, end.code)
	out := strings.ReplaceAll(s.out.String(), "\r", "")
	assert.Contains(t, out, "/dev/pts/")
	assert.Contains(t, out, "typed\n", "the terminal echoes")
	assert.Contains(t, out, "got typed\n")
}

// A cancelled exec kills its command at once and returns; the exec then
// leaves nothing in the container.
func TestACancelledExecKillsItsCommand(t *testing.T) {
	t.Parallel()
	rt := sandboxed(t, processruntime.Options{})
	pod := execPod()
	waitRunning(t, rt, pod, "c")
	t.Cleanup(func() { terminate(t, rt, pod, 1) })

	s := startExec(t, rt, pod.UID, "c", false, false, "sh", "-c", "echo started; exec sleep 1000")
	s.out.waitFor(t, "started\n")
	// The shell may still be inside its execve of sleep, where the kernel
	// shows an empty environment and a scan cannot tell whose it is.
	eventually(t, 10*time.Second, "the exec runs beside the container", func() bool { return len(processesOf(t, pod.UID, "c")) == 2 })
	s.cancel()
	end := s.wait(t)
	assert.ErrorIs(t, end.err, context.Canceled)
	eventually(t, 10*time.Second, "the exec's process is gone", func() bool { return len(processesOf(t, pod.UID, "c")) == 1 })
}

// An exec reaches a container the agent adopted after a restart, once
// the pod is synced again; execs the earlier run left are killed.
func TestExecAfterAnAgentRestart(t *testing.T) {
	t.Parallel()
	stateDir := sandboxStateDir(t)
	first := sandboxed(t, processruntime.Options{StateDir: stateDir})
	pod := execPod()
	waitRunning(t, first, pod, "c")
	left := startExec(t, first, pod.UID, "c", false, false, "sh", "-c", "echo started; exec sleep 1000")
	left.out.waitFor(t, "started\n")
	require.NoError(t, first.Close())
	assert.Error(t, left.wait(t).err, "the session ends with its agent")

	second := openRuntime(t, processruntime.Options{StateDir: stateDir})
	t.Cleanup(func() { terminate(t, second, pod, 1) })
	r := runExec(t, second, pod.UID, "c", "", "true")
	assert.ErrorContains(t, r.err, "has not been synced since the agent started")
	_, err := syncPod(second, pod)
	require.NoError(t, err)
	r = runExec(t, second, pod.UID, "c", "", "sh", "-c", "id -u; cat /data/marker")
	require.NoError(t, r.err)
	assert.Equal(t, "1000\nfrom-the-container\n", r.out)
	eventually(t, 10*time.Second, "the earlier run's exec was killed", func() bool { return len(processesOf(t, pod.UID, "c")) == 1 })
}

// An exec into a container that does not run is refused.
func TestExecIntoAnExitedContainerIsRefused(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "c", "exit 0")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	ev.wait(t, "the exit", exitedEvent(pod.UID, "c", 1))
	r := runExec(t, rt, pod.UID, "c", "", "true")
	assert.True(t, errors.Is(r.err, processruntime.ErrNotRunning), "%v", r.err)
}
