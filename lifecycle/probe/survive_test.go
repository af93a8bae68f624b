package probe

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle/internal/windowtest"
)

// A runner that ignores its ctx is abandoned at the probe's timeout: the
// check fails on the clock's time, no second call starts beside the stuck
// one, and Run does not return before it does (the bubble would report a
// leaked goroutine otherwise).
func TestHungExecRunnerIsAbandonedAtTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		release := make(chan struct{})
		e.exec.set(func(context.Context, []string) ([]byte, int, error) {
			<-release // ignores ctx
			return nil, 0, nil
		})
		pod := podWith(func(c *v1.Container) {
			c.ReadinessProbe = execProbe(10, 1, 1)
			c.ReadinessProbe.TimeoutSeconds = 2
		})
		e.sync(pod, ids, t0)
		assert.Equal(t, 1, e.exec.count())
		assert.Empty(t, e.rec.takeEvents(), "no result before the timeout")
		e.step(2 * time.Second)
		assert.Equal(t, []string{`spec.containers{app} Warning Unhealthy Readiness probe failed: command "check" timed out`}, e.rec.takeEvents())

		e.step(8 * time.Second)
		e.step(10 * time.Second)
		assert.Equal(t, 1, e.exec.count(), "no new exec while the abandoned one runs")

		close(release)
		waitIdle()
		e.step(10 * time.Second)
		assert.Equal(t, 2, e.exec.count(), "probing resumes once the runner returned")
	})
}

func TestRunWaitsForARunnerThatIgnoresItsCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		release := make(chan struct{})
		e.exec.set(func(context.Context, []string) ([]byte, int, error) {
			<-release
			return nil, 0, nil
		})
		pod := podWith(func(c *v1.Container) { c.LivenessProbe = execProbe(10, 1, 1) })
		e.sync(pod, ids, t0)
		e.cancel()
		waitIdle()
		select {
		case <-e.done:
			t.Fatal("Run returned while an exec call it started still runs")
		default:
		}
		close(release)
		<-e.done
	})
}

func TestPanickingRunnerIsAnErroredCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		e.exec.set(func(context.Context, []string) ([]byte, int, error) { panic("boom") })
		pod := podWith(func(c *v1.Container) { c.ReadinessProbe = execProbe(10, 1, 1) })
		e.sync(pod, ids, t0)
		assert.Equal(t, 3, e.exec.count(), "an errored check is tried three times")
		assert.Equal(t, []string{"spec.containers{app} Warning Unhealthy Readiness probe errored and resulted in unknown state: exec runner panicked: boom"}, e.rec.takeEvents())
		assert.False(t, e.m.IsReady(pod, "app", "cri://c1"), "an errored check decides nothing")
		assert.Zero(t, e.rec.takeSyncs())

		e.exec.set(func(context.Context, []string) ([]byte, int, error) { return nil, 0, errors.New("no such container") })
		e.step(10 * time.Second)
		assert.Equal(t, []string{"spec.containers{app} Warning Unhealthy Readiness probe errored and resulted in unknown state: no such container"}, e.rec.takeEvents())

		e.exec.exit(0, "")
		e.step(10 * time.Second)
		assert.True(t, e.m.IsReady(pod, "app", "cri://c1"), "the manager goes on")
	})
}

func TestPanickingCallbacksAreSurvived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{RequestSync: func(types.UID) { panic("sync bug") }, Recorder: panicRecorder{}})
		pod := podWith(func(c *v1.Container) { c.ReadinessProbe = execProbe(10, 1, 1) })
		e.sync(pod, ids, t0)
		assert.True(t, e.m.IsReady(pod, "app", "cri://c1"))
		e.exec.exit(1, "")
		e.step(10 * time.Second)
		assert.False(t, e.m.IsReady(pod, "app", "cri://c1"), "checks go on after callbacks panicked")
	})
}

type panicRecorder struct{}

func (panicRecorder) Eventf(_ runtime.Object, _, _, _ string, _ ...any) { panic("recorder bug") }

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		waitIdle()
		assert.EqualError(t, e.m.Run(context.Background()), "probe: Run called twice")
	})
}

func TestBadInput(t *testing.T) {
	_, err := New(nil, Options{})
	assert.EqualError(t, err, "probe: New needs a PodTermination (the pod workers), got nil")

	m, err := New(windowtest.New(), Options{})
	require.NoError(t, err)
	assert.EqualError(t, m.UpdatePodStatus(nil, &v1.PodStatus{}), "probe: UpdatePodStatus needs a pod, got nil")
	pod := podWith(nil)
	assert.EqualError(t, m.UpdatePodStatus(pod, nil), "probe: UpdatePodStatus of pod ns/web needs a status, got nil")
	pod.UID = ""
	assert.EqualError(t, m.UpdatePodStatus(pod, &v1.PodStatus{}), "probe: UpdatePodStatus: pod ns/web has no UID")
	assert.False(t, m.IsReady(nil, "app", "x"))
	assert.False(t, m.IsStarted(nil, "app", "x"))
	_, ok := m.ShouldRestart(nil, "app", "x")
	assert.False(t, ok)
	assert.EqualError(t, Validate(nil), "probe: Validate needs a pod, got nil")
}

func TestValidate(t *testing.T) {
	i32 := func(v int32) int32 { return v }
	g := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name string
		edit func(c *v1.Container)
		err  string
	}{
		{"valid", func(c *v1.Container) { c.LivenessProbe = execProbe(10, 1, 3) }, ""},
		{"zeros are defaults", func(c *v1.Container) { c.ReadinessProbe = execProbe(0, 0, 0) }, ""},
		{"huge numbers are accepted", func(c *v1.Container) {
			c.LivenessProbe = execProbe(1<<31-1, 1, 1<<31-1)
			c.LivenessProbe.TimeoutSeconds = 1<<31 - 1
			c.LivenessProbe.TerminationGracePeriodSeconds = g(1 << 62)
		}, ""},
		{"negative period", func(c *v1.Container) { c.LivenessProbe = execProbe(-1, 1, 3) },
			`probe: container "app": livenessProbe.periodSeconds is -1; want 0 (default 10) or more`},
		{"negative timeout", func(c *v1.Container) {
			c.ReadinessProbe = execProbe(10, 1, 3)
			c.ReadinessProbe.TimeoutSeconds = i32(-5)
		}, `readinessProbe.timeoutSeconds is -5; want 0 (default 1) or more`},
		{"negative delay", func(c *v1.Container) {
			c.StartupProbe = execProbe(10, 1, 3)
			c.StartupProbe.InitialDelaySeconds = -1
		}, `startupProbe.initialDelaySeconds is -1`},
		{"negative failure threshold", func(c *v1.Container) { c.LivenessProbe = execProbe(10, 1, -3) }, "failureThreshold is -3"},
		{"no handler", func(c *v1.Container) { c.LivenessProbe = &v1.Probe{} }, "livenessProbe.handler: none is set"},
		{"two handlers", func(c *v1.Container) {
			c.LivenessProbe = execProbe(10, 1, 3)
			c.LivenessProbe.TCPSocket = &v1.TCPSocketAction{Port: intstrFrom(80)}
		}, "livenessProbe.handler: exec and tcpSocket are set; want exactly one"},
		{"empty command", func(c *v1.Container) {
			c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{}}}
		}, "exec.command is empty"},
		{"liveness success threshold", func(c *v1.Container) { c.LivenessProbe = execProbe(10, 2, 3) }, "successThreshold is 2; a liveness probe's must be 1"},
		{"readiness grace", func(c *v1.Container) {
			c.ReadinessProbe = execProbe(10, 1, 3)
			c.ReadinessProbe.TerminationGracePeriodSeconds = g(5)
		}, "only liveness and startup probes may set it"},
		{"zero grace", func(c *v1.Container) {
			c.LivenessProbe = execProbe(10, 1, 3)
			c.LivenessProbe.TerminationGracePeriodSeconds = g(0)
		}, "terminationGracePeriodSeconds is 0; want 1 or more"},
		{"unknown port name", func(c *v1.Container) {
			c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstrName("web")}}}
		}, `readinessProbe.httpGet.port: port "web" not found`},
		{"bad scheme", func(c *v1.Container) {
			c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstrFrom(80), Scheme: "FTP"}}}
		}, `httpGet.scheme is "FTP"; want HTTP or HTTPS`},
		{"bad tcp port", func(c *v1.Container) {
			c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstrFrom(0)}}}
		}, "tcpSocket.port: invalid port number: 0"},
		{"bad grpc port", func(c *v1.Container) {
			c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 70000}}}
		}, "grpc.port is 70000; want 1 to 65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(podWith(tc.edit))
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}

	pod := podWith(nil)
	pod.Spec.InitContainers = []v1.Container{{Name: "setup", LivenessProbe: execProbe(10, 1, 3)}}
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", ReadinessProbe: execProbe(10, 1, 3)}}}
	err := Validate(pod)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `init container "setup": probes run only on sidecars`)
	assert.Contains(t, err.Error(), `ephemeral container "dbg": ephemeral containers may not have probes`)
}

func TestInvalidProbeNeverPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) {
			c.ReadinessProbe = execProbe(-10, 1, 3)
			c.StartupProbe = &v1.Probe{}
		})
		st := runningStatus(pod, ids, t0)
		err := e.m.UpdatePodStatus(pod, st)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "readinessProbe.periodSeconds is -10")
		assert.Contains(t, err.Error(), "startupProbe.handler: none is set")
		assert.False(t, started(st, "app"), "an invalid startup probe never passes")
		assert.False(t, ready(st, "app"))
		e.step(time.Hour)
		assert.Zero(t, e.exec.count(), "an invalid probe never runs")
		assert.Error(t, e.m.UpdatePodStatus(pod, runningStatus(pod, ids, t0)), "reported at every sync")
	})
}

func TestExecProbeWithoutARunner(t *testing.T) {
	m, err := New(windowtest.New(), Options{})
	require.NoError(t, err)
	pod := podWith(func(c *v1.Container) { c.ReadinessProbe = execProbe(10, 1, 3) })
	st := runningStatus(pod, ids, t0)
	err = m.UpdatePodStatus(pod, st)
	assert.EqualError(t, err, `probe: container "app": readinessProbe.exec needs an ExecRunner (Options.Exec), and none was given`)
	assert.False(t, ready(st, "app"))
}

// A period of 68 years (the largest periodSeconds) schedules without
// overflow, and the first check still runs at once.
func TestHugePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		pod := podWith(func(c *v1.Container) { c.LivenessProbe = execProbe(1<<31-1, 1, 3) })
		e.sync(pod, ids, t0)
		assert.Equal(t, 1, e.exec.count())
		due, ok := e.m.sched.Due(key{pod.UID, wkey{"app", Liveness}})
		require.True(t, ok)
		assert.Equal(t, t0.Add(time.Duration(1<<31-1)*time.Second), due)
		e.step(time.Hour)
		assert.Equal(t, 1, e.exec.count())
	})
}

// A check begun for one run of a container decides nothing for the next:
// its result comes back after the runtime reported a restart.
func TestCheckOfAnOldRunIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Options{})
		release := make(chan struct{})
		e.exec.set(func(context.Context, []string) ([]byte, int, error) {
			<-release
			return nil, 0, nil // passes, for the run it began with
		})
		pod := podWith(func(c *v1.Container) {
			c.ReadinessProbe = execProbe(10, 1, 1)
			c.ReadinessProbe.TimeoutSeconds = 100
		})
		e.sync(pod, ids, t0)
		require.Equal(t, 1, e.exec.count())
		e.sync(pod, map[string]string{"app": "cri://c2"}, t0.Add(time.Second))
		close(release)
		waitIdle()
		assert.False(t, e.m.IsReady(pod, "app", "cri://c2"), "the new run is not ready on the old run's check")
		assert.Zero(t, e.rec.takeSyncs())
	})
}
