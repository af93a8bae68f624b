package processruntime_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// ofType matches the events of one type for one pod.
func ofType(uid types.UID, typ processruntime.EventType) func(processruntime.Event) bool {
	return func(e processruntime.Event) bool { return e.UID == uid && e.Type == typ }
}

// TestKillingEventsPrecedeTheExits: termination announces one
// ContainerKilling per running container, before their exits, and none for
// a container that already ended.
func TestKillingEventsPrecedeTheExits(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "a", "exec sleep 300", "b", "exec sleep 300", "done", "exit 0")
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Command: []string{"sh", "-c", "exit 0"}}}
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	ev.wait(t, "the init container's exit", exitedEvent(pod.UID, "init", 1))
	_, err = syncPod(rt, pod)
	require.NoError(t, err)
	require.Equal(t, 4, ev.count(ofType(pod.UID, processruntime.ContainerStarted)))
	ev.wait(t, "the exit of done", exitedEvent(pod.UID, "done", 1))
	assert.Zero(t, ev.count(ofType(pod.UID, processruntime.ContainerKilling)), "nothing is killed before termination")

	terminate(t, rt, pod, 1)
	ev.mu.Lock()
	var order []string
	for _, e := range ev.list {
		if e.UID != pod.UID {
			continue
		}
		switch e.Type {
		case processruntime.ContainerKilling:
			order = append(order, "killing "+e.Container)
			assert.False(t, e.Init)
			c, ok := e.ContainerStatus()
			require.True(t, ok)
			assert.Equal(t, processruntime.ContainerStateRunning, c.State, "the container runs when it is announced killed")
		case processruntime.ContainerExited:
			if e.Container == "a" || e.Container == "b" {
				order = append(order, "exited "+e.Container)
			}
		}
	}
	ev.mu.Unlock()
	require.Len(t, order, 4)
	assert.Equal(t, []string{"killing a", "killing b"}, order[:2], "both containers are announced killed, in name order, before either exits")
	assert.ElementsMatch(t, []string{"exited a", "exited b"}, order[2:])
}

// TestBackOffEventsNameTheWaitingContainer: each SyncPod that declines a
// restart because of the backoff sends one ContainerBackOff for the
// container, with its BackOffUntil; the immediate first restart sends none.
func TestBackOffEventsNameTheWaitingContainer(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(time.Now())
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, Clock: clk, BackOff: 10 * time.Second})
	pod := newPod(v1.RestartPolicyAlways, "crash", `while [ ! -e release ]; do sleep 0.02; done; rm release; exit 1`)
	release := filepath.Join(rt.PodDir(pod.UID), "scratch", "release")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(release, nil, 0o600))
	ev.wait(t, "the first exit", exitedEvent(pod.UID, "crash", 1))
	_, err = syncPod(rt, pod)
	require.NoError(t, err, "the first restart is immediate")
	assert.Zero(t, ev.count(ofType(pod.UID, processruntime.ContainerBackOff)))

	require.NoError(t, os.WriteFile(release, nil, 0o600))
	ev.wait(t, "the second exit", exitedEvent(pod.UID, "crash", 2))
	for range 2 {
		_, err = syncPod(rt, pod)
		require.ErrorIs(t, err, processruntime.ErrBackOff)
	}
	backOffs := 0
	ev.mu.Lock()
	for _, e := range ev.list {
		if e.UID == pod.UID && e.Type == processruntime.ContainerBackOff {
			backOffs++
			assert.Equal(t, "crash", e.Container)
			c, ok := e.ContainerStatus()
			require.True(t, ok)
			assert.Equal(t, processruntime.ContainerStateExited, c.State)
			assert.Equal(t, clk.Now().Add(10*time.Second), c.BackOffUntil)
			require.NotNil(t, e.Exit())
			assert.Equal(t, int32(1), e.Exit().Code)
		}
	}
	ev.mu.Unlock()
	assert.Equal(t, 2, backOffs, "one per SyncPod in backoff")
	terminate(t, rt, pod, 1)
}

// TestStartFailureEventCarriesTheMessage: a command that cannot start is
// a ContainerExited whose Exit says why.
func TestStartFailureEventCarriesTheMessage(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, Path: "/nonexistent-bin"})
	pod := newPod(v1.RestartPolicyNever)
	pod.Spec.Containers = []v1.Container{{Name: "c", Command: []string{"sleep", "1"}}}
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	got := ev.wait(t, "the exit", exitedEvent(pod.UID, "c", 1))
	require.NotNil(t, got.Exit())
	assert.Equal(t, processruntime.ReasonStartError, got.Exit().Reason)
	assert.Equal(t, `command "sleep" not found in PATH "/nonexistent-bin"`, got.Exit().Message)
	assert.Zero(t, ev.count(ofType(pod.UID, processruntime.ContainerStarted)))
	terminate(t, rt, pod, 1)
}
