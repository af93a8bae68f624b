package simcloud_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
)

func pod(uid types.UID, policy v1.RestartPolicy) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + string(uid), Namespace: "ns", UID: uid},
		Spec: v1.PodSpec{
			RestartPolicy: policy,
			Containers:    []v1.Container{{Name: "a", Image: "img:1"}, {Name: "b", Image: "img:1"}},
		},
	}
}

func newCloud(t *testing.T, opts simcloud.Options) *simcloud.Cloud {
	t.Helper()
	c, err := simcloud.New(opts)
	require.NoError(t, err)
	return c
}

func TestLifecycleAndCallLog(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, simcloud.Options{})
	require.NoError(t, c.Create(ctx, pod("u1", v1.RestartPolicyAlways)))
	assert.ErrorIs(t, c.Create(ctx, pod("u1", v1.RestartPolicyAlways)), vk.ErrAlreadyExists)

	rp, err := c.Status(ctx, "u1")
	require.NoError(t, err)
	assert.True(t, rp.Running())
	assert.Equal(t, "ns", rp.Namespace)
	assert.Len(t, rp.Containers, 2)

	updated := pod("u1", v1.RestartPolicyAlways)
	updated.Spec.Containers[1].Image = "img:2"
	require.NoError(t, c.Update(ctx, updated))
	rp, err = c.Status(ctx, "u1")
	require.NoError(t, err)
	assert.Equal(t, "img:1", rp.Containers[0].Image)
	assert.Equal(t, "img:2", rp.Containers[1].Image)
	assert.EqualValues(t, 1, rp.Containers[1].RestartCount)

	assert.Error(t, c.Remove(ctx, "u1"), "removing a running pod is refused")
	require.NoError(t, c.Stop(ctx, "u1", 3*time.Second))
	require.NoError(t, c.Stop(ctx, "u1", time.Second), "stopping a stopped pod succeeds")
	rp, err = c.Status(ctx, "u1")
	require.NoError(t, err)
	assert.True(t, rp.Exited())
	require.NoError(t, c.Remove(ctx, "u1"))

	_, err = c.Status(ctx, "u1")
	assert.ErrorIs(t, err, vk.ErrNotFound)
	assert.ErrorIs(t, c.Stop(ctx, "u1", time.Second), vk.ErrNotFound)
	assert.ErrorIs(t, c.Remove(ctx, "u1"), vk.ErrNotFound)
	assert.ErrorIs(t, c.Update(ctx, updated), vk.ErrNotFound)
	assert.Empty(t, c.Pods())

	var got []simcloud.Op
	for _, call := range c.Calls(simcloud.OpCreate, simcloud.OpStop, simcloud.OpRemove) {
		got = append(got, call.Op)
	}
	assert.Equal(t, []simcloud.Op{"create", "create", "remove", "stop", "stop", "remove", "stop", "remove"}, got)
	stops := c.Calls(simcloud.OpStop)
	assert.Equal(t, 3*time.Second, stops[0].Grace)
	assert.Len(t, c.Calls(), 14)
}

func TestExitAppliesTheRestartPolicy(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, simcloud.Options{})
	for uid, policy := range map[types.UID]v1.RestartPolicy{"always": v1.RestartPolicyAlways, "onfailure": v1.RestartPolicyOnFailure, "never": v1.RestartPolicyNever} {
		require.NoError(t, c.Create(ctx, pod(uid, policy)))
	}
	cases := []struct {
		uid     types.UID
		code    int32
		exited  bool
		restart int32
	}{
		{"always", 0, false, 1},
		{"onfailure", 1, false, 1},
		{"onfailure", 0, true, 1},
		{"never", 2, true, 0},
	}
	for _, tc := range cases {
		require.NoError(t, c.Exit(tc.uid, tc.code))
		rp, err := c.Status(ctx, tc.uid)
		require.NoError(t, err)
		assert.Equal(t, tc.exited, rp.Exited(), tc.uid)
		assert.Equal(t, tc.restart, rp.Containers[0].RestartCount, tc.uid)
		if tc.exited {
			assert.Equal(t, tc.code, rp.Containers[0].ExitCode, tc.uid)
		}
	}
	assert.ErrorIs(t, c.Exit("nope", 0), vk.ErrNotFound)
}

func TestLatencyComesFromTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c := newCloud(t, simcloud.Options{Clock: clk, Latency: time.Second})
	done := make(chan error, 1)
	go func() { done <- c.Create(context.Background(), pod("u1", v1.RestartPolicyAlways)) }()
	for !clk.HasWaiters() {
		// HasWaiters is the fake clock's race-free hand-off: the call is
		// now waiting for its latency.
		select {
		case err := <-done:
			t.Fatalf("Create returned before its latency passed: %v", err)
		default:
		}
	}
	assert.Empty(t, c.Pods(), "nothing happens before the latency passed")
	clk.Step(1500 * time.Millisecond)
	require.NoError(t, <-done)
	require.Len(t, c.Pods(), 1)
	assert.Equal(t, time.Unix(1001, 500_000_000), c.Pods()[0].CreatedAt)
}

func TestFailuresAreSeededAndTakeNoEffect(t *testing.T) {
	ctx := context.Background()
	run := func() []bool {
		c := newCloud(t, simcloud.Options{FailureRate: 0.5, Seed: 99})
		var out []bool
		for i := range 40 {
			err := c.Create(ctx, pod(types.UID(fmt.Sprint("u", i)), v1.RestartPolicyAlways))
			if err != nil {
				assert.ErrorIs(t, err, simcloud.ErrUnavailable)
			}
			out = append(out, err == nil)
		}
		ok := 0
		for _, b := range out {
			if b {
				ok++
			}
		}
		assert.Len(t, c.Pods(), ok, "only the calls that succeeded took effect")
		return out
	}
	first := run()
	assert.Equal(t, first, run(), "the same seed gives the same failures")
	assert.Contains(t, first, true)
	assert.Contains(t, first, false)

	c := newCloud(t, simcloud.Options{FailureRate: 1})
	assert.ErrorIs(t, c.Create(ctx, pod("u", v1.RestartPolicyAlways)), simcloud.ErrUnavailable)
	assert.Empty(t, c.Pods(), "a failed call takes no effect")
	c.SetFailureRate(0)
	require.NoError(t, c.Create(ctx, pod("u", v1.RestartPolicyAlways)))

	c.InjectError(simcloud.OpStop, "u", 2)
	assert.ErrorIs(t, c.Stop(ctx, "u", 0), simcloud.ErrUnavailable)
	assert.ErrorIs(t, c.Stop(ctx, "u", 0), simcloud.ErrUnavailable)
	require.NoError(t, c.Stop(ctx, "u", 0))

	_, err := simcloud.New(simcloud.Options{FailureRate: 2})
	assert.Error(t, err)
	_, err = simcloud.New(simcloud.Options{Latency: -1})
	assert.Error(t, err)
}

func TestPauseHoldsCallsForOnePod(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, simcloud.Options{})
	require.NoError(t, c.Create(ctx, pod("held", v1.RestartPolicyAlways)))
	require.NoError(t, c.Create(ctx, pod("free", v1.RestartPolicyAlways)))
	resume := c.Pause("held")

	done := make(chan error, 1)
	go func() { done <- c.Stop(ctx, "held", time.Second) }()
	require.NoError(t, c.Stop(ctx, "free", time.Second), "other pods are not held")
	require.Eventually(t, func() bool { return len(c.Held(simcloud.OpStop)) == 1 }, 10*time.Second, time.Millisecond, "the held Stop is listed as held")
	held := c.Held()
	require.Len(t, held, 1)
	assert.Equal(t, simcloud.Call{Op: simcloud.OpStop, UID: "held", Grace: time.Second}, held[0])
	assert.Empty(t, c.Held(simcloud.OpRemove), "filtered by operation")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, c.Stop(cctx, "held", time.Second), context.Canceled, "a held call returns when its ctx ends")

	select {
	case err := <-done:
		t.Fatalf("held Stop returned: %v", err)
	default:
	}
	resume()
	resume()
	require.NoError(t, <-done)
	assert.Empty(t, c.Held(), "a resumed call is no longer held")
	rp, err := c.Status(ctx, "held")
	require.NoError(t, err)
	assert.True(t, rp.Exited())

	// A pause of some operations holds only those.
	resume = c.Pause("free", simcloud.OpRemove)
	defer resume()
	_, err = c.Status(ctx, "free")
	require.NoError(t, err)
	go func() { done <- c.Remove(ctx, "free") }()
	select {
	case err := <-done:
		t.Fatalf("held Remove returned: %v", err)
	default:
	}
	resume()
	require.NoError(t, <-done)
}

func TestInjectAndList(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, simcloud.Options{})
	c.Inject(vk.RemotePod{UID: "old", Namespace: "ns", Name: "x", CreatedAt: time.Unix(1, 0),
		Containers: []vk.RemoteContainer{{Name: "a", State: vk.ContainerRunning}}})
	require.NoError(t, c.Create(ctx, pod("new", v1.RestartPolicyNever)))
	list, err := c.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, types.UID("old"), list[0].UID)
	assert.Equal(t, types.UID("new"), list[1].UID)
	require.NoError(t, c.Lose("new"))
	assert.ErrorIs(t, c.Lose("new"), vk.ErrNotFound)
	assert.Len(t, c.Pods(), 1)
	c.InjectError(simcloud.OpList, "", 1)
	_, err = c.List(ctx)
	assert.ErrorIs(t, err, simcloud.ErrUnavailable)
}

// The call record keeps the newest MaxCalls calls, in order, however many
// were made: a long benchmark's resyncs do not grow it without bound.
func TestCallLogKeepsNewest(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, simcloud.Options{MaxCalls: 3})
	for i := range 20 {
		_, err := c.Status(ctx, types.UID(fmt.Sprint("u", i)))
		assert.ErrorIs(t, err, vk.ErrNotFound)
		want := make([]types.UID, 0, 3)
		for j := max(0, i-2); j <= i; j++ {
			want = append(want, types.UID(fmt.Sprint("u", j)))
		}
		var got []types.UID
		for _, call := range c.Calls() {
			got = append(got, call.UID)
		}
		require.Equal(t, want, got, "after %d calls", i+1)
		require.Len(t, c.Calls(simcloud.OpStatus), len(want))
	}

	_, err := simcloud.New(simcloud.Options{MaxCalls: -1})
	require.ErrorContains(t, err, "simcloud: MaxCalls")
}
