package probe

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

var ids = map[string]string{"app": "cri://c1"}

func TestReadinessBeforeFirstSuccessAndThresholds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) { c.ReadinessProbe = execProbe(10, 2, 2) })

		st := e.sync(pod, ids, t0)
		assert.False(t, ready(st, "app"), "not ready before the first success")
		assert.True(t, started(st, "app"), "no startup probe: started")
		cr := condition(st, v1.ContainersReady)
		assert.Equal(t, v1.ConditionFalse, cr.Status)
		assert.Equal(t, "ContainersNotReady", cr.Reason)
		assert.Equal(t, "containers with unready status: [app]", cr.Message)
		assert.Equal(t, 1, e.exec.count(), "a started container not yet ready is checked at once")
		assert.Equal(t, 0, e.rec.takeSyncs(), "one success of two decides nothing")

		e.step(10 * time.Second)
		assert.Equal(t, 2, e.exec.count())
		assert.Equal(t, 1, e.rec.takeSyncs(), "the readiness change asks for a sync")
		st = e.sync(pod, ids, t0)
		assert.True(t, ready(st, "app"))
		assert.Equal(t, v1.ConditionTrue, condition(st, v1.ContainersReady).Status)
		assert.Equal(t, v1.ConditionTrue, condition(st, v1.PodReady).Status)
		assert.True(t, e.m.IsReady(pod, "app", "cri://c1"))

		e.exec.exit(1, "down")
		e.step(10 * time.Second)
		assert.Equal(t, []string{"spec.containers{app} Warning Unhealthy Readiness probe failed: down"}, e.rec.takeEvents())
		assert.Equal(t, 0, e.rec.takeSyncs(), "one failure of two decides nothing")
		assert.True(t, e.m.IsReady(pod, "app", "cri://c1"))
		e.step(10 * time.Second)
		assert.Len(t, e.rec.takeEvents(), 1)
		assert.Equal(t, 1, e.rec.takeSyncs())
		st = e.sync(pod, ids, t0)
		assert.False(t, ready(st, "app"))
		assert.Equal(t, v1.ConditionFalse, condition(st, v1.PodReady).Status)
	})
}

func TestLivenessFailureAsksForARestartWithTheProbesGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		five := int64(5)
		pod := podWith(func(c *v1.Container) {
			c.LivenessProbe = execProbe(10, 1, 3)
			c.LivenessProbe.TerminationGracePeriodSeconds = &five
		})
		e.exec.exit(1, "dead")
		e.sync(pod, ids, t0)
		assert.Equal(t, 1, e.exec.count(), "the first check runs at once")
		e.step(10 * time.Second)
		_, restart := e.m.ShouldRestart(pod, "app", "cri://c1")
		assert.False(t, restart, "two failures of three")
		assert.Equal(t, 0, e.rec.takeSyncs())
		e.step(10 * time.Second)
		r, restart := e.m.ShouldRestart(pod, "app", "cri://c1")
		require.True(t, restart)
		assert.Equal(t, Restart{Probe: Liveness, Message: "Container app failed liveness probe", GracePeriodSeconds: 5}, r)
		assert.Equal(t, 1, e.rec.takeSyncs(), "a liveness failure asks for a sync")
		assert.Len(t, e.rec.takeEvents(), 3, "an Unhealthy event per failed check")

		for range 3 {
			e.step(10 * time.Second)
		}
		assert.Equal(t, 3, e.exec.count(), "on hold until the container runs again")

		e.exec.exit(0, "")
		e.sync(pod, map[string]string{"app": "cri://c2"}, t0.Add(time.Minute))
		_, restart = e.m.ShouldRestart(pod, "app", "cri://c2")
		assert.False(t, restart, "the new run starts live")
		_, restart = e.m.ShouldRestart(pod, "app", "cri://c1")
		assert.False(t, restart, "the old run is forgotten")
		e.step(10 * time.Second)
		assert.Equal(t, 4, e.exec.count(), "probing resumes for the new run")
	})
}

func TestRestartGracePeriodRule(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name              string
		deletion, spec, p *int64
		want              int64
	}{
		{"deletion grace wins", i(3), i(30), i(5), 3},
		{"the probe's own", nil, i(30), i(5), 5},
		{"the pod's", nil, i(30), nil, 30},
		{"none: the kubelet's 2", nil, nil, nil, 2},
		{"huge is cut", nil, i(1 << 62), nil, 100 * 365 * 24 * 60 * 60},
		{"negative means 1", nil, i(-7), nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podWith(nil)
			pod.DeletionGracePeriodSeconds, pod.Spec.TerminationGracePeriodSeconds = tc.deletion, tc.spec
			assert.Equal(t, tc.want, killGrace(pod, tc.p))
		})
	}
}

// gatedPod is a pod whose container has a startup probe of the given
// period (its exec command "startup") and readiness and liveness probes of
// period others ("ready", "live"), each with a success threshold of 1 and
// a failure threshold of 3.
func gatedPod(startup, others int32) *v1.Pod {
	return podWith(func(c *v1.Container) {
		c.StartupProbe = execProbe(startup, 1, 3)
		c.StartupProbe.Exec.Command = []string{"startup"}
		c.ReadinessProbe = execProbe(others, 1, 3)
		c.ReadinessProbe.Exec.Command = []string{"ready"}
		c.LivenessProbe = execProbe(others, 1, 3)
		c.LivenessProbe.Exec.Command = []string{"live"}
	})
}

func TestStartupGatesTheOtherProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := gatedPod(10, 10)
		up := false
		e.exec.set(func(_ context.Context, cmd []string) ([]byte, int, error) {
			if cmd[0] == "startup" && !up {
				return nil, 1, nil
			}
			return nil, 0, nil
		})
		st := e.sync(pod, ids, t0)
		assert.False(t, started(st, "app"))
		assert.False(t, ready(st, "app"))
		e.step(10 * time.Second)
		assert.Equal(t, 2, e.exec.callsOf("startup"))
		assert.Equal(t, 0, e.exec.callsOf("ready"), "readiness waits for startup")
		assert.Equal(t, 0, e.exec.callsOf("live"), "liveness waits for startup")
		assert.False(t, e.m.IsStarted(pod, "app", "cri://c1"))

		up = true
		e.step(10 * time.Second)
		assert.Equal(t, 1, e.rec.takeSyncs(), "the startup success asks for a sync")
		st = e.sync(pod, ids, t0) // the sync it asked for: readiness is checked at once
		assert.True(t, started(st, "app"))
		assert.Equal(t, 1, e.exec.callsOf("ready"))
		assert.Equal(t, 1, e.rec.takeSyncs(), "readiness passed")
		st = e.sync(pod, ids, t0)
		assert.True(t, ready(st, "app"))

		for range 3 {
			e.step(10 * time.Second)
		}
		assert.Equal(t, 3, e.exec.callsOf("startup"), "startup stops once passed")
		assert.Equal(t, 4, e.exec.callsOf("ready"))
		assert.Equal(t, 3, e.exec.callsOf("live"))
	})
}

func TestLivenessAndReadinessWaitForAStatusThatSaysStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := gatedPod(10, 3)
		e.sync(pod, ids, t0)
		for range 10 {
			e.step(time.Second)
		}
		require.Equal(t, 1, e.exec.callsOf("startup"), "the startup probe passed at its first check")
		require.True(t, e.m.IsStarted(pod, "app", "cri://c1"))
		for range 10 { // three more periods of the other probes, with no sync
			e.step(time.Second)
		}
		assert.Equal(t, 0, e.exec.callsOf("ready"), "readiness waits for a status that says started")
		assert.Equal(t, 0, e.exec.callsOf("live"), "liveness waits for a status that says started")

		st := e.sync(pod, ids, t0)
		assert.True(t, started(st, "app"))
		assert.Equal(t, 1, e.exec.callsOf("ready"), "the status that says started checks readiness at once")
		for range 3 {
			e.step(time.Second)
		}
		assert.Equal(t, 2, e.exec.callsOf("ready"))
		assert.Equal(t, 1, e.exec.callsOf("live"))
	})
}

func TestStartupFailureAsksForARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) { c.StartupProbe = execProbe(5, 1, 2) })
		e.exec.exit(1, "not yet")
		e.sync(pod, ids, t0)
		e.step(5 * time.Second)
		r, ok := e.m.ShouldRestart(pod, "app", "cri://c1")
		require.True(t, ok)
		assert.Equal(t, Startup, r.Probe)
		assert.Equal(t, "Container app failed startup probe", r.Message)
		assert.Equal(t, int64(30), r.GracePeriodSeconds)
		assert.Equal(t, 1, e.rec.takeSyncs())
	})
}

func TestInitialDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) {
			c.LivenessProbe = execProbe(10, 1, 3)
			c.LivenessProbe.InitialDelaySeconds = 25
		})
		e.sync(pod, ids, t0)
		e.step(10 * time.Second)
		e.step(10 * time.Second)
		assert.Equal(t, 0, e.exec.count(), "ticks at 0, 10 and 20s fall in the delay")
		e.step(10 * time.Second)
		assert.Equal(t, 1, e.exec.count(), "the tick at 30s is past it")
	})
}

func TestFirstProbeJitterWhileTheManagerIsYoung(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		var asked time.Duration
		e.m.jitter = func(d time.Duration) time.Duration { asked = d; return 7 * time.Second }
		pod := podWith(func(c *v1.Container) { c.LivenessProbe = execProbe(10, 1, 3) })
		e.sync(pod, ids, t0)
		assert.Equal(t, 10*time.Second, asked, "jitter within one period")
		assert.Equal(t, 0, e.exec.count())
		e.step(7 * time.Second)
		assert.Equal(t, 1, e.exec.count())
		e.step(10 * time.Second)
		assert.Equal(t, 2, e.exec.count())

		// Once the manager is older than a period, new probes start at once.
		e.step(time.Minute)
		other := podWith(func(c *v1.Container) { c.LivenessProbe = execProbe(10, 1, 3) })
		other.UID = "u2"
		asked = 0
		before := e.exec.count()
		e.sync(other, ids, t0)
		assert.Zero(t, asked)
		assert.Equal(t, before+1, e.exec.count())
	})
}

func TestTerminationStopsEveryProbeAndReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) {
			c.ReadinessProbe = execProbe(10, 1, 1)
			c.ReadinessProbe.Exec.Command = []string{"ready"}
			c.LivenessProbe = execProbe(10, 1, 1)
			c.LivenessProbe.Exec.Command = []string{"live"}
		})
		e.sync(pod, ids, t0)
		e.step(10 * time.Second)
		live, readyCalls := e.exec.callsOf("live"), e.exec.callsOf("ready")
		require.Positive(t, live)
		st := e.sync(pod, ids, t0)
		require.True(t, ready(st, "app"), "ready before termination")

		e.win.Terminate(pod.UID)
		e.exec.exit(1, "shutting down")
		e.step(10 * time.Second)
		e.step(10 * time.Second)
		assert.Equal(t, live, e.exec.callsOf("live"), "liveness stops once termination is requested")
		_, restart := e.m.ShouldRestart(pod, "app", "cri://c1")
		assert.False(t, restart, "no restart of a terminating pod's container")
		assert.Equal(t, readyCalls, e.exec.callsOf("ready"), "readiness stops once termination is requested")
		e.exec.exit(0, "")
		st = e.sync(pod, ids, t0)
		assert.False(t, ready(st, "app"), "a terminating pod is not ready, whatever its probe said last")
		assert.Contains(t, st.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [app]"})

		e.win.Stop(pod.UID)
		e.step(10 * time.Second)
		calls := e.exec.count()
		e.step(time.Minute)
		assert.Equal(t, calls, e.exec.count(), "no probing once the pod cannot run")
		assert.Zero(t, e.m.sched.Len(), "every probe of the pod is dropped")
		st = runningStatus(pod, ids, t0)
		require.NoError(t, e.m.UpdatePodStatus(pod, st))
		assert.False(t, ready(st, "app"))
		assert.Zero(t, e.m.sched.Len(), "a pod that cannot run gets no probes")
	})
}

func TestNewRunStartsNotReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) { c.ReadinessProbe = execProbe(10, 1, 3) })
		e.sync(pod, ids, t0)
		st := e.sync(pod, ids, t0)
		require.True(t, ready(st, "app"))
		e.exec.set(hangUntilShutdown) // no result for the new run
		st = runningStatus(pod, map[string]string{"app": "cri://c2"}, t0.Add(time.Minute))
		require.NoError(t, e.m.UpdatePodStatus(pod, st))
		assert.False(t, ready(st, "app"), "a restarted container is not ready until its probe passes again")
		assert.False(t, e.m.IsReady(pod, "app", "cri://c1"), "nor is the old run")
	})
}

func TestAdoptedContainerKeepsItsReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) {
			c.StartupProbe = execProbe(10, 1, 3)
			c.ReadinessProbe = execProbe(10, 1, 3)
		})
		yes := true
		pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", ContainerID: "cri://c1", Ready: true, Started: &yes}}
		e.exec.set(hangUntilShutdown)
		st := runningStatus(pod, ids, t0)
		require.NoError(t, e.m.UpdatePodStatus(pod, st))
		assert.True(t, started(st, "app"), "the API status says this run started")
		assert.True(t, ready(st, "app"), "and was ready: an agent restart does not flip it")

		st = runningStatus(pod, map[string]string{"app": "cri://c9"}, t0)
		require.NoError(t, e.m.UpdatePodStatus(pod, st))
		assert.False(t, started(st, "app"), "another run is not adopted")
	})
}

func TestSidecarReadinessCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		always := v1.ContainerRestartPolicyAlways
		pod := podWith(nil)
		pod.Spec.InitContainers = []v1.Container{
			{Name: "setup"},
			{Name: "proxy", RestartPolicy: &always, ReadinessProbe: execProbe(10, 1, 3)},
		}
		e.exec.exit(1, "")
		st := runningStatus(pod, map[string]string{"app": "cri://a", "proxy": "cri://p"}, t0)
		st.InitContainerStatuses[0] = v1.ContainerStatus{Name: "setup", ContainerID: "cri://s",
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}
		require.NoError(t, e.m.UpdatePodStatus(pod, st))
		waitIdle()
		assert.True(t, ready(st, "setup"), "a regular init container that exited 0 is ready")
		assert.False(t, ready(st, "proxy"))
		assert.True(t, ready(st, "app"))
		cr := condition(st, v1.ContainersReady)
		assert.Equal(t, v1.ConditionFalse, cr.Status)
		assert.Equal(t, "containers with unready status: [proxy]", cr.Message)
		assert.Positive(t, e.exec.count(), "the sidecar's probe runs")
	})
}

func TestFinishedContainerStopsTicking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) { c.ReadinessProbe = execProbe(10, 1, 3) })
		pod.Spec.RestartPolicy = v1.RestartPolicyNever
		e.sync(pod, ids, t0)
		st := runningStatus(pod, ids, t0)
		st.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, StartedAt: st.ContainerStatuses[0].State.Running.StartedAt}}
		require.NoError(t, e.m.UpdatePodStatus(pod, st))
		assert.False(t, ready(st, "app"))
		e.step(10 * time.Second)
		assert.Zero(t, e.m.sched.Len(), "a container that will not run again is not ticked")
		calls := e.exec.count()
		e.step(time.Minute)
		assert.Equal(t, calls, e.exec.count())
	})
}

func TestExecCommandIsExpanded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) {
			c.Env = []v1.EnvVar{{Name: "FILE", Value: "/tmp/ok"}}
			c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "$(FILE)"}}}}
		})
		e.sync(pod, ids, t0)
		e.exec.mu.Lock()
		defer e.exec.mu.Unlock()
		assert.Equal(t, [][]string{{"cat", "/tmp/ok"}}, e.exec.cmds)
	})
}

func TestRemovePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) { c.LivenessProbe = execProbe(10, 1, 3) })
		e.sync(pod, ids, t0)
		require.Equal(t, 1, e.m.sched.Len())
		e.m.RemovePod(pod.UID)
		e.m.RemovePod("never-seen")
		assert.Zero(t, e.m.sched.Len())
		calls := e.exec.count()
		e.step(time.Minute)
		assert.Equal(t, calls, e.exec.count())
	})
}

// hangUntilShutdown is an exec answer that never decides: it returns
// only when its ctx ends (a timeout: a failure; or Run's end).
func hangUntilShutdown(ctx context.Context, _ []string) ([]byte, int, error) {
	<-ctx.Done()
	return nil, 0, ctx.Err()
}
