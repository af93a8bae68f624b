package nodeshutdown_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const housekeepingInterval = 2 * time.Second

// env is a whole agent (lifecycle.NewAgent over a FakeSyncer) whose node
// shutdown manager the tests drive; the test plays the API server source.
// Make it inside a synctest bubble.
type env struct {
	t       *testing.T
	ctx     context.Context
	clock   *testingclock.FakeClock
	syncer  *podworkertest.FakeSyncer[struct{}]
	agent   *lifecycle.Agent[struct{}]
	workers *podworker.PodWorkers[struct{}]
	m       *nodeshutdown.Manager

	mu       sync.Mutex
	rejected []v1.PodStatus
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ctx: t.Context(), clock: testingclock.NewFakeClock(epoch), syncer: podworkertest.NewFakeSyncer[struct{}]()}
	e.syncer.Clock = e.clock
	var err error
	e.agent, err = lifecycle.NewAgent[struct{}](e.syncer, lifecycle.AgentOptions[struct{}]{
		SyncLoop: lifecycle.SyncLoopOptions{
			HousekeepingInterval: housekeepingInterval,
			OnReject: func(_ context.Context, _ *v1.Pod, status v1.PodStatus) {
				e.mu.Lock()
				defer e.mu.Unlock()
				e.rejected = append(e.rejected, status)
			},
		},
		Clock: e.clock,
	})
	require.NoError(t, err)
	e.workers, e.m = e.agent.Workers(), e.agent.NodeShutdown()
	return e
}

// start runs the agent until the test ends.
func (e *env) start() {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.agent.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		require.NoError(e.t, <-done)
	})
	synctest.Wait()
}

// set sends the API server's full snapshot and waits until the agent is
// idle.
func (e *env) set(pods ...*v1.Pod) {
	e.t.Helper()
	require.NoError(e.t, e.agent.Config().SetPods(e.ctx, mirror.ApiserverSource, pods))
	synctest.Wait()
}

// housekeep moves the clock by one housekeeping interval and waits.
func (e *env) housekeep() {
	e.clock.Step(housekeepingInterval)
	synctest.Wait()
}

func (e *env) trace(uid types.UID) string { return e.syncer.Trace(uid) }

func (e *env) stage(uid types.UID) podworker.Stage {
	info, ok := e.workers.Pod(uid)
	if !ok {
		return podworker.StageAbsent
	}
	return info.Stage
}

func (e *env) rejections() []v1.PodStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.rejected)
}

// apiPod returns an API server pod with a 30s grace period, created
// created seconds after epoch.
func apiPod(uid types.UID, name string, created int) *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			UID: uid, Name: name, Namespace: "default",
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(created) * time.Second)),
		},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "app", Image: "app:1"}},
		},
	}
}

// staticPod returns a static pod as a ManifestSource makes it.
func staticPod(t *testing.T, uid types.UID, name string) *v1.Pod {
	t.Helper()
	pod := apiPod(uid, name, 0)
	pod.Namespace = "kube-system"
	require.NoError(t, mirror.PrepareStaticPod(pod, "node-a", mirror.FileSource))
	return pod
}

func bubble(t *testing.T, f func(t *testing.T)) { synctest.Test(t, f) }
