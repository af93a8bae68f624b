package processruntime_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/admission"
)

// warnings returns the PodWarning events of uid's container with reason.
func warnings(ev *events, uid types.UID, container, reason string) []processruntime.Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []processruntime.Event
	for _, e := range ev.list {
		if e.UID == uid && e.Type == processruntime.PodWarning && e.Container == container && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// nthExit waits for the nth ContainerExited event of uid's container and
// returns its exit.
func nthExit(t *testing.T, ev *events, uid types.UID, container string, n int) *processruntime.ExitStatus {
	t.Helper()
	is := func(e processruntime.Event) bool {
		return e.UID == uid && e.Type == processruntime.ContainerExited && e.Container == container
	}
	ev.wait(t, fmt.Sprintf("exit %d of %s", n, container), func(processruntime.Event) bool { return ev.countLocked(is) >= n })
	ev.mu.Lock()
	defer ev.mu.Unlock()
	seen := 0
	for _, e := range ev.list {
		if is(e) {
			if seen++; seen == n {
				return e.Exit()
			}
		}
	}
	return nil
}

// A busybox-style container, args and no command, runs sh -c as on a
// kubelet (busybox has no ENTRYPOINT), in and out of a sandbox; the pod's
// events say once that the node's sh stands in for the image's, however
// often the container restarts.
func TestArgsOnlyContainerRunsTheImagesShell(t *testing.T) {
	t.Parallel()
	for _, mode := range []processruntime.SandboxMode{processruntime.SandboxAuto, processruntime.SandboxOff} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			t.Parallel()
			ev := newEvents()
			rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, Sandbox: mode})
			pod := newPod(v1.RestartPolicyOnFailure, "main", "")
			pod.Spec.Containers[0].Command = nil
			pod.Spec.Containers[0].Image = "registry.k8s.io/busybox:1.36"
			pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "CODE", Value: "7"}}
			// $CODE for sh: $(CODE) is the kubelet's expansion, which
			// lifecycle/podenv does before the runtime is called.
			// Exits 7 the first time (restarted: OnFailure), 0 the second.
			pod.Spec.Containers[0].Args = []string{"sh", "-c", `if [ -e "$0" ]; then exit 0; fi; : > "$0"; exit $CODE`, "ran-once"}
			require.True(t, rt.Admit(context.Background(), &admission.Attributes{Pod: pod}).Admit, "an args-only container is admitted")
			terminal, err := syncPod(rt, pod)
			require.NoError(t, err)
			require.False(t, terminal)
			first := nthExit(t, ev, pod.UID, "main", 1)
			require.NotNil(t, first)
			assert.Equal(t, int32(7), first.Code, "sh ran the script: %+v", first)

			// The first restart is immediate; SyncPod may see the second
			// run end before it returns.
			_, err = syncPod(rt, pod)
			require.NoError(t, err)
			second := nthExit(t, ev, pod.UID, "main", 2)
			assert.Equal(t, int32(0), second.Code, "the second run found the file of the first: %+v", second)
			terminal, err = syncPod(rt, pod)
			require.NoError(t, err)
			assert.True(t, terminal)

			got := warnings(ev, pod.UID, "main", processruntime.ReasonHostProgram)
			require.Len(t, got, 1, "one warning for the container, not one per start")
			assert.Contains(t, got[0].Message, `image "registry.k8s.io/busybox:1.36" is not pulled: this node runs its own programs, so the container's sh (`)
			assert.Equal(t, v1.PodSucceeded, processruntime.APIStatus(pod, status(t, rt, pod.UID)).Phase)
			terminate(t, rt, pod, 1)
		})
	}
}

// A container whose command cannot be resolved (args only, an image in no
// table) waits in CreateContainerConfigError, with one Failed event, and
// is retried; the pod stays Pending, never Failed, under any policy.
func TestUnresolvableCommandWaits(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "app", "")
	pod.Spec.Containers[0].Command = nil
	pod.Spec.Containers[0].Image = "example.com/team/app:1.0"
	pod.Spec.Containers[0].Args = []string{"--port=8080"}
	require.True(t, rt.Admit(context.Background(), &admission.Attributes{Pod: pod}).Admit, "admitted: it waits rather than fails")
	for range 3 {
		terminal, err := syncPod(rt, pod)
		require.ErrorIs(t, err, processruntime.ErrCreateContainerConfig)
		require.False(t, terminal)
	}
	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	assert.Equal(t, v1.PodPending, api.Phase)
	require.NotNil(t, api.ContainerStatuses[0].State.Waiting)
	assert.Equal(t, processruntime.ReasonCreateContainerConfigError, api.ContainerStatuses[0].State.Waiting.Reason)
	assert.Contains(t, api.ContainerStatuses[0].State.Waiting.Message, `image "example.com/team/app:1.0" is not in this node's image table`)
	failed := ev.count(func(e processruntime.Event) bool {
		return e.UID == pod.UID && e.Type == processruntime.ContainerFailed && e.Reason == processruntime.ReasonCreateContainerConfigError
	})
	assert.Equal(t, 1, failed, "one Failed event while the reason stays the same")
	assert.Empty(t, containerProcesses(t, pod.UID))

	// The agent's image table resolves it: the next sync runs it.
	table, err := processruntime.NewImageTable(map[string]processruntime.ImageConfig{"team/app": {Entrypoint: []string{"sh", "-c", "exit 0"}}})
	require.NoError(t, err)
	rt2 := openRuntime(t, processruntime.Options{OnEvent: ev.add, ImageConfigs: table})
	pod2 := pod.DeepCopy()
	pod2.UID += "-2"
	_, err = syncPod(rt2, pod2)
	require.NoError(t, err)
	exit := nthExit(t, ev, pod2.UID, "app", 1)
	assert.Equal(t, int32(0), exit.Code, "sh -c 'exit 0' --port=8080 ran: %+v", exit)
	terminate(t, rt2, pod2, 1)
	terminate(t, rt, pod, 1)
}

// A container whose program does not exist waits in RunContainerError
// with the start's error, then in CrashLoopBackOff while its restart
// backs off; under restartPolicy Always the pod is never Failed.
func TestMissingProgramWaitsInRunContainerErrorThenCrashLoop(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, BackOff: time.Minute})
	pod := newPod(v1.RestartPolicyAlways, "app", "")
	pod.Spec.Containers[0].Command = []string{"no-such-program-podkit"}
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	nthExit(t, ev, pod.UID, "app", 1)
	api := processruntime.APIStatus(pod, status(t, rt, pod.UID))
	st := api.ContainerStatuses[0]
	require.NotNil(t, st.State.Waiting, "%+v", st.State)
	assert.Equal(t, processruntime.ReasonRunContainerError, st.State.Waiting.Reason)
	assert.Contains(t, st.State.Waiting.Message, `"no-such-program-podkit" not found`)
	require.NotNil(t, st.LastTerminationState.Terminated)
	assert.Equal(t, processruntime.ReasonStartError, st.LastTerminationState.Terminated.Reason)
	assert.Equal(t, int32(128), st.LastTerminationState.Terminated.ExitCode)
	assert.NotEqual(t, v1.PodFailed, api.Phase)

	// The immediate first restart fails too, and the next waits a minute.
	_, err = syncPod(rt, pod)
	require.ErrorIs(t, err, processruntime.ErrBackOff)
	nthExit(t, ev, pod.UID, "app", 2)
	api = processruntime.APIStatus(pod, status(t, rt, pod.UID))
	st = api.ContainerStatuses[0]
	require.NotNil(t, st.State.Waiting)
	assert.Equal(t, processruntime.ReasonCrashLoopBackOff, st.State.Waiting.Reason)
	assert.True(t, strings.HasPrefix(st.State.Waiting.Message, "back-off 1m0s restarting failed container=app"), st.State.Waiting.Message)
	assert.Equal(t, int32(1), st.RestartCount)
	assert.Equal(t, v1.PodRunning, api.Phase, "as a kubelet reports a crash-looping pod: not Failed")
	assert.Empty(t, warnings(ev, pod.UID, "app", processruntime.ReasonHostProgram), "nothing ran, so nothing stood in")
	terminate(t, rt, pod, 1)
}

// countLocked is count for a match function called while e.mu is held
// (from wait's match): it does not lock.
func (e *events) countLocked(match func(processruntime.Event) bool) int {
	n := 0
	for _, ev := range e.list {
		if match(ev) {
			n++
		}
	}
	return n
}

// A busybox container's sh is the node's busybox ash where the node has
// busybox (ImageConfig.Multicall), as in the image: `[[` and `echo -n`
// work, where the node's dash has neither.
func TestBusyboxCommandsAreTheNodesBusyboxApplets(t *testing.T) {
	t.Parallel()
	bb := needBusybox(t)
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "c", "")
	pod.Spec.Containers[0].Image = "busybox:1.28"
	pod.Spec.Containers[0].Command = []string{"/bin/sh", "-c", `[[ a == a ]] && echo -n ash; echo`}
	out := runToEnd(t, rt, ev, pod)
	assert.Equal(t, "ash\n", out)
	got := warnings(ev, pod.UID, "c", processruntime.ReasonHostProgram)
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Message, "the container's sh (an applet of "+bb+") is the node's")

	// Another image's sh is the node's sh, as before.
	other := newPod(v1.RestartPolicyNever, "c", "")
	other.Spec.Containers[0].Image = "debian:12"
	other.Spec.Containers[0].Command = []string{"sh", "-c", `echo $0`}
	assert.Equal(t, "sh\n", runToEnd(t, rt, ev, other))
}

// A sandboxed pod's PATH is an image's (DefaultPath), not the agent's,
// whose own directories (/root/...) its user could not search; an
// Options.Path is every pod's.
func TestASandboxedPodHasAnImagesPath(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add})
	assert.Equal(t, processruntime.DefaultPath+"\n", runToEnd(t, rt, ev, shellPod(`echo "$PATH"`)))

	given := "/usr/bin:/bin"
	rt = sandboxed(t, processruntime.Options{OnEvent: ev.add, Path: given})
	assert.Equal(t, given+"\n", runToEnd(t, rt, ev, shellPod(`echo "$PATH"`)))
}
