package processruntime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/probe"
)

// fast makes a probe check every second and decide at the first failure.
func fast(h v1.ProbeHandler) *v1.Probe {
	return &v1.Probe{ProbeHandler: h, PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 2}
}

// A container whose liveness probe fails is killed (preStop-less: SIGTERM
// within its grace) and started again by its restart policy, with the
// kubelet's Unhealthy and Killing events: for an exec probe (the
// documentation's liveness-exec: a file that goes away), an httpGet probe
// (a /healthz that goes away) and a tcpSocket probe (a port that closes).
func TestLivenessFailureRestartsTheContainer(t *testing.T) {
	needBusybox(t)
	t.Parallel()
	e := newFeatureEnv(t)
	execPod := featurePod("c", `touch /tmp/healthy; sleep 2; rm /tmp/healthy; exec sleep 600`)
	execPod.Spec.Containers[0].LivenessProbe = fast(v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}})

	httpPod := featurePod("c", `mkdir -p /tmp/www; echo ok > /tmp/www/healthz; (sleep 2; rm /tmp/www/healthz) & exec busybox httpd -f -p 8080 -h /tmp/www`)
	httpPod.Spec.Containers[0].LivenessProbe = fast(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}})

	tcpPod := featurePod("c", `busybox httpd -f -p 8080 -h /tmp & pid=$!; sleep 2; kill $pid; exec sleep 600`)
	tcpPod.Spec.Containers[0].LivenessProbe = fast(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}})

	e.run(execPod, httpPod, tcpPod)
	for name, pod := range map[string]*v1.Pod{"exec": execPod, "httpGet": httpPod, "tcpSocket": tcpPod} {
		t.Run(name, func(t *testing.T) {
			first := e.waitRunning(pod, "c")
			e.waitEvent(pod, probe.ReasonUnhealthy, "Liveness probe failed")
			e.waitEvent(pod, "Killing", "Container c failed liveness probe, will be restarted")
			eventually(t, 30*time.Second, "the container runs again", func() bool {
				c, _ := status(t, e.rt, pod.UID).Container("c")
				return c.State == processruntime.ContainerStateRunning && c.ID != first.ID
			})
			c, _ := status(t, e.rt, pod.UID).Container("c")
			assert.GreaterOrEqual(t, c.RestartCount, int32(1))
			require.NotNil(t, c.LastExit)
			assert.Contains(t, []int32{137, 143}, c.LastExit.Code, "killed: %+v", c.LastExit)
		})
	}
}

// A readiness probe on a port nothing listens on keeps the running
// container, and the pod, not Ready (the documentation's tcp readiness on
// a closed port); once the port opens, both turn Ready.
func TestReadinessFalseOnAClosedPort(t *testing.T) {
	needBusybox(t)
	t.Parallel()
	e := newFeatureEnv(t)
	pod := featurePod("c", `while [ ! -f /tmp/open ]; do sleep 0.2; done; exec busybox httpd -f -p 8080 -h /tmp`)
	pod.Spec.Containers[0].ReadinessProbe = fast(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}})
	e.run(pod)
	e.waitRunning(pod, "c")
	e.waitEvent(pod, probe.ReasonUnhealthy, "Readiness probe failed")

	cs := e.container(pod, "c")
	assert.NotNil(t, cs.State.Running, "the container runs")
	assert.False(t, cs.Ready, "but is not ready")
	for _, want := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		assert.Equal(t, v1.ConditionFalse, condition(e.api(pod), want), want)
	}

	e.exec(pod, "c", "touch", "/tmp/open")
	eventually(t, 30*time.Second, "the pod turns Ready once the port opens", func() bool {
		return condition(e.api(pod), v1.PodReady) == v1.ConditionTrue
	})
	assert.True(t, e.container(pod, "c").Ready)
	assert.Equal(t, int32(0), e.container(pod, "c").RestartCount, "readiness restarts nothing")
}

// A startup probe gates the others: until it passes the container is not
// started (nor ready), and its liveness probe, which would fail until then,
// does not run (the container is never restarted).
func TestStartupProbeGatesLiveness(t *testing.T) {
	t.Parallel()
	e := newFeatureEnv(t)
	pod := featurePod("c", `sleep 3; touch /tmp/started; exec sleep 600`)
	started := v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "/tmp/started"}}}
	pod.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: started, PeriodSeconds: 1, FailureThreshold: 30, TimeoutSeconds: 2}
	pod.Spec.Containers[0].LivenessProbe = fast(started)
	e.run(pod)
	e.waitRunning(pod, "c")
	e.waitEvent(pod, probe.ReasonUnhealthy, "Startup probe failed")
	cs := e.container(pod, "c")
	require.NotNil(t, cs.Started)
	assert.False(t, *cs.Started, "not started before its startup probe passed")
	assert.False(t, cs.Ready)

	eventually(t, 30*time.Second, "started once the startup probe passes", func() bool {
		cs := e.container(pod, "c")
		return cs.Started != nil && *cs.Started && cs.Ready
	})
	assert.Equal(t, int32(0), e.container(pod, "c").RestartCount, "the liveness probe did not run before the startup probe passed")
	for _, ev := range e.rec.of(pod) {
		assert.NotContains(t, ev.message, "Liveness probe failed")
	}
}

// condition returns the status of st's condition typ ("" when missing).
func condition(st v1.PodStatus, typ v1.PodConditionType) v1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}
