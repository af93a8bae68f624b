package lifecycle_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/probe"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// An agent built with Features has its per-pod loops wired once: a failing
// exec liveness probe, run through the agent's ExecRunner on the agent's
// clock, records Unhealthy through the agent's Recorder and asks the
// workers for a sync of the pod (RequestSync), and once the pod is
// forgotten its probes are gone.
func TestAgentFeaturesAreWiredOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		execs := make(chan string, 16)
		failing := probe.ExecRunnerFunc(func(_ context.Context, id string, cmd []string, _ time.Duration) ([]byte, int, error) {
			execs <- id
			return []byte("not alive"), 1, nil
		})
		e := newAgentEnv(t, func(o *lifecycle.AgentOptions[struct{}]) {
			o.Features = &lifecycle.PodFeatureOptions{Exec: failing, VolumeRoot: t.TempDir()}
		})
		f := e.agent.Features()
		require.NotNil(t, f)
		require.NotNil(t, f.Probes)
		require.NotNil(t, f.Hooks)
		require.NotNil(t, f.Deadline)
		require.NotNil(t, f.Env)
		require.NotNil(t, f.Volumes)
		e.start()

		pod := apiPod("p", "web", 0)
		pod.Spec.Containers[0].LivenessProbe = &v1.Probe{
			ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}},
			PeriodSeconds:    1,
			FailureThreshold: 1,
		}
		e.set(mirror.ApiserverSource, pod)
		require.Equal(t, "sync:create", e.trace("p"))

		running := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", ContainerID: "proc://1",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(e.clock.Now())}},
		}}}
		require.NoError(t, f.Probes.UpdatePodStatus(pod, &running))
		for i := 0; i < 3 && len(execs) == 0; i++ {
			e.clock.Step(time.Second)
			synctest.Wait()
		}
		require.Equal(t, "proc://1", <-execs, "the probe ran through the agent's ExecRunner")
		synctest.Wait()
		restart, ok := f.Probes.ShouldRestart(pod, "app", "proc://1")
		require.True(t, ok, "the liveness failure is the runtime's to act on")
		assert.Equal(t, int64(30), restart.GracePeriodSeconds)
		assert.Equal(t, "sync:create sync:sync", e.trace("p"), "the probe asked the workers for a sync of the pod")
		assert.Contains(t, e.events.reasons(), probe.ReasonUnhealthy+" Pod/web", "through the agent's Recorder")

		e.set(mirror.ApiserverSource)
		require.Equal(t, podworker.StageFinished, e.stage("p"))
		e.housekeep()
		_, ok = f.Probes.ShouldRestart(pod, "app", "proc://1")
		assert.False(t, ok, "a forgotten pod's probes are gone")

		e.shutdown() // Run stops every feature loop (the bubble would not end otherwise)
	})
}

// Without Features, an agent builds none, and the names stay free.
func TestAgentWithoutFeatures(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		assert.Nil(t, e.agent.Features())
		require.NoError(t, e.agent.Add("probes", lifecycle.RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil })))
	})
}

// A feature's invalid option is NewAgent's error, naming the part.
func TestAgentFeaturesInvalidOption(t *testing.T) {
	bubble(t, func(t *testing.T) {
		e := newEnv(t, nil)
		_, err := lifecycle.NewAgent[struct{}](e.syncer, lifecycle.AgentOptions[struct{}]{
			Features: &lifecycle.PodFeatureOptions{Env: podenv.Options{MaxBytes: -1}},
		})
		assert.ErrorContains(t, err, "lifecycle: NewAgent: podenv:")
	})
}
