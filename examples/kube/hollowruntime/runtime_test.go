package hollowruntime_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/examples/kube/hollowruntime"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// The conformance suite's containers, scripted by their command (the
// suite names them; the program follows the command).
var conformanceContainers = podworkertest.ConformanceContainers{
	LongRunning: v1.Container{Command: []string{"run"}},
	IgnoresTerm: v1.Container{Command: []string{"ignore-term"}},
	Succeeds:    v1.Container{Command: []string{"exit=0"}},
}

// commandProgram reads a container's program from its command.
func commandProgram(_ *v1.Pod, c *v1.Container, _ bool) (hollowruntime.Program, error) {
	if len(c.Command) == 0 {
		return hollowruntime.Program{}, nil
	}
	return hollowruntime.ParseProgram(c.Command[0])
}

func TestConformance(t *testing.T) {
	podworkertest.RunConformance(t, func(t *testing.T) podworkertest.ConformanceTarget[processruntime.PodStatus] {
		rt, err := hollowruntime.New(hollowruntime.Options{Program: commandProgram})
		require.NoError(t, err)
		t.Cleanup(func() { rt.Close() })
		return podworkertest.ConformanceTarget[processruntime.PodStatus]{
			Syncer: rt,
			Status: rt,
			Probe: podworkertest.ProbeFunc(func(ctx context.Context, uid types.UID) (map[string]string, error) {
				st, err := rt.PodStatus(ctx, uid, time.Time{})
				out := map[string]string{}
				for _, c := range append(st.InitContainers, st.Containers...) {
					if c.State == processruntime.ContainerStateRunning {
						out[c.Name] = c.ID
					}
				}
				return out, err
			}),
			Containers: conformanceContainers,
			Parallel:   true,
		}
	})
}

// newPod returns a pod of one container "app" with the annotation
// program (none when empty) and restart policy.
func newPod(uid string, program string, policy v1.RestartPolicy) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)},
		Spec:       v1.PodSpec{RestartPolicy: policy, Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
	}
	if program != "" {
		p.Annotations = map[string]string{hollowruntime.AnnotationPrefix + "app": program}
	}
	return p
}

func newRuntime(t *testing.T, clk *testingclock.FakeClock, events chan<- processruntime.Event) *hollowruntime.Runtime {
	t.Helper()
	opts := hollowruntime.Options{Clock: clk}
	if events != nil {
		opts.OnEvent = func(ev processruntime.Event) { events <- ev }
	}
	rt, err := hollowruntime.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	return rt
}

func apiStatus(t *testing.T, rt *hollowruntime.Runtime, pod *v1.Pod) v1.PodStatus {
	t.Helper()
	st, err := rt.PodStatus(context.Background(), pod.UID, time.Time{})
	require.NoError(t, err)
	return processruntime.APIStatus(pod, st)
}

func TestPodRuns(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	events := make(chan processruntime.Event, 10)
	rt := newRuntime(t, clk, events)
	require.NoError(t, rt.StartNetwork(netipPrefix(t, "10.244.3.0/24"), ""))
	pod := newPod("a", "", v1.RestartPolicyAlways)
	pod.Spec.InitContainers = []v1.Container{{Name: "setup", Image: "busybox"}}

	terminal, err := rt.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, processruntime.PodStatus{})
	require.NoError(t, err)
	assert.False(t, terminal)
	st := apiStatus(t, rt, pod)
	assert.Equal(t, v1.PodRunning, st.Phase)
	assert.Equal(t, "10.244.3.2", st.PodIP)
	require.Len(t, st.InitContainerStatuses, 1)
	require.NotNil(t, st.InitContainerStatuses[0].State.Terminated, "the init container completed at once")
	require.NotNil(t, st.ContainerStatuses[0].State.Running)
	assert.True(t, st.ContainerStatuses[0].Ready)
	var types []processruntime.EventType
	for len(events) > 0 {
		types = append(types, (<-events).Type)
	}
	assert.Equal(t, []processruntime.EventType{processruntime.ContainerStarted, processruntime.ContainerExited, processruntime.ContainerStarted}, types)

	// Idempotent: a resync starts nothing again.
	_, err = rt.SyncPod(ctx, podworker.SyncPodSync, pod, nil, processruntime.PodStatus{})
	require.NoError(t, err)
	assert.Empty(t, events)
	assert.Len(t, rt.RunningPods(), 1)
}

func TestDeletedPodTerminatesWithinItsGrace(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		program string
		waits   bool
		code    int32
	}{
		{"exits on SIGTERM", "", false, 143},
		{"ignores SIGTERM", "ignore-term", true, 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Unix(1000, 0))
			rt := newRuntime(t, clk, nil)
			pod := newPod("a", tc.program, v1.RestartPolicyAlways)
			_, err := rt.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, processruntime.PodStatus{})
			require.NoError(t, err)

			done := make(chan error, 1)
			go func() { done <- rt.SyncTerminatingPod(ctx, pod, processruntime.PodStatus{}, 30, nil) }()
			if tc.waits {
				require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "the stop waits on the clock")
				clk.Step(29 * time.Second)
				select {
				case err := <-done:
					t.Fatalf("stopped before its grace period ended: %v", err)
				default:
				}
				clk.Step(time.Second)
			}
			require.NoError(t, <-done)
			st := apiStatus(t, rt, pod)
			require.NotNil(t, st.ContainerStatuses[0].State.Terminated)
			assert.Equal(t, tc.code, st.ContainerStatuses[0].State.Terminated.ExitCode)
			assert.Equal(t, v1.PodFailed, st.Phase)
			assert.Empty(t, rt.RunningPods())
			require.NoError(t, rt.SyncTerminatedPod(ctx, pod, processruntime.PodStatus{}))
			assert.Empty(t, rt.RuntimePods())
		})
	}
}

func TestCancelledStopKillsAtOnce(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	rt := newRuntime(t, clk, nil)
	pod := newPod("a", "ignore-term", v1.RestartPolicyAlways)
	_, err := rt.SyncPod(context.Background(), podworker.SyncPodCreate, pod, nil, processruntime.PodStatus{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = rt.SyncTerminatingPod(ctx, pod, processruntime.PodStatus{}, 600, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, rt.RunningPods(), "killed at once")
	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 600, nil))
}

func TestFailingContainerFollowsRestartPolicy(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		policy   v1.RestartPolicy
		restarts bool
	}{
		{v1.RestartPolicyAlways, true},
		{v1.RestartPolicyOnFailure, true},
		{v1.RestartPolicyNever, false},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Unix(1000, 0))
			events := make(chan processruntime.Event, 20)
			rt := newRuntime(t, clk, events)
			pod := newPod("a", "exit=3 after=5s", tc.policy)
			terminal, err := rt.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, processruntime.PodStatus{})
			require.NoError(t, err)
			require.False(t, terminal)
			assert.Equal(t, processruntime.ContainerStarted, (<-events).Type)

			clk.Step(5 * time.Second) // the program's exit
			assert.Equal(t, processruntime.ContainerExited, (<-events).Type)
			terminal, err = rt.SyncPod(ctx, podworker.SyncPodSync, pod, nil, processruntime.PodStatus{})
			require.NoError(t, err)
			if !tc.restarts {
				assert.True(t, terminal)
				assert.Equal(t, v1.PodFailed, apiStatus(t, rt, pod).Phase)
				return
			}
			assert.False(t, terminal)
			st := apiStatus(t, rt, pod)
			assert.EqualValues(t, 1, st.ContainerStatuses[0].RestartCount, "the first restart is at once")
			require.NotNil(t, st.ContainerStatuses[0].LastTerminationState.Terminated)
			assert.EqualValues(t, 3, st.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode)

			// The second exit waits out the backoff, in CrashLoopBackOff.
			assert.Equal(t, processruntime.ContainerStarted, (<-events).Type)
			clk.Step(5 * time.Second)
			assert.Equal(t, processruntime.ContainerExited, (<-events).Type)
			_, err = rt.SyncPod(ctx, podworker.SyncPodSync, pod, nil, processruntime.PodStatus{})
			require.ErrorIs(t, err, hollowruntime.ErrBackOff)
			var retry interface{ RetryDelay() time.Duration }
			require.True(t, errors.As(err, &retry))
			assert.Equal(t, 10*time.Second, retry.RetryDelay())
			st = apiStatus(t, rt, pod)
			require.NotNil(t, st.ContainerStatuses[0].State.Waiting)
			assert.Equal(t, processruntime.ReasonCrashLoopBackOff, st.ContainerStatuses[0].State.Waiting.Reason)
			clk.Step(10 * time.Second)
			_, err = rt.SyncPod(ctx, podworker.SyncPodSync, pod, nil, processruntime.PodStatus{})
			require.NoError(t, err)
			assert.EqualValues(t, 2, apiStatus(t, rt, pod).ContainerStatuses[0].RestartCount)
		})
	}
}

func TestSucceededContainerUnderOnFailureIsTerminal(t *testing.T) {
	rt := newRuntime(t, testingclock.NewFakeClock(time.Unix(1000, 0)), nil)
	pod := newPod("a", "exit=0", v1.RestartPolicyOnFailure)
	terminal, err := rt.SyncPod(context.Background(), podworker.SyncPodCreate, pod, nil, processruntime.PodStatus{})
	require.NoError(t, err)
	assert.True(t, terminal)
	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 30, nil))
	assert.Equal(t, v1.PodSucceeded, apiStatus(t, rt, pod).Phase)
}

func TestBadProgramWaits(t *testing.T) {
	rt := newRuntime(t, testingclock.NewFakeClock(time.Unix(1000, 0)), nil)
	pod := newPod("a", "exit=300", v1.RestartPolicyAlways)
	_, err := rt.SyncPod(context.Background(), podworker.SyncPodCreate, pod, nil, processruntime.PodStatus{})
	require.ErrorIs(t, err, hollowruntime.ErrCreateContainerConfig)
	st := apiStatus(t, rt, pod)
	require.NotNil(t, st.ContainerStatuses[0].State.Waiting)
	assert.Equal(t, "CreateContainerConfigError", st.ContainerStatuses[0].State.Waiting.Reason)
	assert.Contains(t, st.ContainerStatuses[0].State.Waiting.Message, "exit code")
}

func TestSessionsFail(t *testing.T) {
	rt := newRuntime(t, testingclock.NewFakeClock(time.Unix(1000, 0)), nil)
	_, err := rt.Exec(context.Background(), "a", "app", []string{"true"}, processruntime.Streams{})
	assert.ErrorIs(t, err, hollowruntime.ErrNoProcesses)
	assert.ErrorIs(t, rt.ReadLogs(context.Background(), "a", "app", processruntime.LogOptions{}, nil), hollowruntime.ErrNoProcesses)
}

func TestParseProgram(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want hollowruntime.Program
		err  string
	}{
		{"", hollowruntime.Program{}, ""},
		{"run", hollowruntime.Program{}, ""},
		{"exit=1 after=2s", hollowruntime.Program{Exits: true, Code: 1, After: 2 * time.Second}, ""},
		{"ignore-term", hollowruntime.Program{IgnoresTerm: true}, ""},
		{"exit=256", hollowruntime.Program{}, "not in 0-255"},
		{"after=1s", hollowruntime.Program{}, "after= without exit="},
		{"after=-1s exit=0", hollowruntime.Program{}, "not a duration"},
		{"sleep", hollowruntime.Program{}, "unknown word"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := hollowruntime.ParseProgram(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func netipPrefix(t *testing.T, s string) netip.Prefix {
	t.Helper()
	p, err := netip.ParsePrefix(s)
	require.NoError(t, err)
	return p
}
