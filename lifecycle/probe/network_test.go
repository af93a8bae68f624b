package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/lifecycle/event"

	"github.com/podkit/podkit/lifecycle/internal/windowtest"
)

// netEnv runs a manager against real sockets: no bubble (a listening
// socket is never idle), a fake clock for periods, and channels that say
// when a check decided (RequestSync) or reported (an event).
type netEnv struct {
	clk    *clocktesting.FakeClock
	m      *Manager
	syncs  chan types.UID
	events chan string
}

func newNetEnv(t *testing.T, host string) *netEnv {
	t.Helper()
	e := &netEnv{clk: clocktesting.NewFakeClock(t0), syncs: make(chan types.UID, 16), events: make(chan string, 16)}
	m, err := New(windowtest.New(), Options{
		Host:        host,
		Clock:       e.clk,
		RequestSync: func(uid types.UID) { e.syncs <- uid },
		Recorder: event.RecorderFunc(func(_ runtime.Object, _, reason, format string, args ...any) {
			e.events <- reason + " " + fmt.Sprintf(format, args...)
		}),
	})
	require.NoError(t, err)
	m.jitter = func(time.Duration) time.Duration { return 0 }
	e.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return e
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second): // a guard against a hang, not a wait for an outcome
		t.Fatal("nothing received in 30s")
		panic("unreachable")
	}
}

func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(addr, "http://"))
	require.NoError(t, err)
	var n int32
	_, err = fmt.Sscan(p, &n)
	require.NoError(t, err)
	return n
}

func TestHTTPReadinessAgainstARealServer(t *testing.T) {
	healthy := make(chan bool, 1)
	healthy <- true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := <-healthy
		healthy <- ok
		if r.Header.Get("X-Probe") != "yes" || !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	e := newNetEnv(t, "")
	pod := podWith(func(c *v1.Container) {
		c.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: portOf(t, srv.URL)}}
		c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromString("http"), HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "yes"}},
		}}, FailureThreshold: 1}
	})
	st := runningStatus(pod, ids, t0)
	require.NoError(t, e.m.UpdatePodStatus(pod, st))
	assert.False(t, ready(st, "app"))
	assert.Equal(t, pod.UID, recv(t, e.syncs), "readiness passed")
	st = runningStatus(pod, ids, t0)
	require.NoError(t, e.m.UpdatePodStatus(pod, st))
	assert.True(t, ready(st, "app"))

	<-healthy
	healthy <- false
	e.clk.Step(10 * time.Second)
	assert.Equal(t, "Unhealthy Readiness probe failed: HTTP probe failed with statuscode: 503", recv(t, e.events))
	assert.Equal(t, pod.UID, recv(t, e.syncs))
	assert.False(t, e.m.IsReady(pod, "app", "cri://c1"))
}

// The case: a pod whose tcp readiness port is closed is not
// ready, and says why.
func TestTCPReadinessOnAClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := int32(l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())
	e := newNetEnv(t, "")
	pod := podWith(func(c *v1.Container) {
		c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(port)}}}
	})
	st := runningStatus(pod, ids, t0)
	require.NoError(t, e.m.UpdatePodStatus(pod, st))
	msg := recv(t, e.events)
	assert.True(t, strings.HasPrefix(msg, "Unhealthy Readiness probe failed: dial tcp 127.0.0.1:"), msg)
	assert.Contains(t, msg, "connection refused")
	assert.False(t, e.m.IsReady(pod, "app", "cri://c1"))
	assert.Equal(t, v1.ConditionFalse, condition(st, v1.PodReady).Status)
}

func TestGRPCLivenessAgainstARealServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(l) }()
	defer s.Stop()
	hs.SetServingStatus("app", healthpb.HealthCheckResponse_NOT_SERVING)

	e := newNetEnv(t, "")
	svc := "app"
	pod := podWith(func(c *v1.Container) {
		c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(l.Addr().(*net.TCPAddr).Port), Service: &svc}}, FailureThreshold: 1}
	})
	require.NoError(t, e.m.UpdatePodStatus(pod, runningStatus(pod, ids, t0)))
	assert.Equal(t, `Unhealthy Liveness probe failed: service unhealthy (responded with "NOT_SERVING")`, recv(t, e.events))
	assert.Equal(t, pod.UID, recv(t, e.syncs))
	r, ok := e.m.ShouldRestart(pod, "app", "cri://c1")
	require.True(t, ok)
	assert.Equal(t, "Container app failed liveness probe", r.Message)
}

func TestHTTPRedirectElsewhereIsAWarning(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusFound)
	}))
	defer srv.Close()
	e := newNetEnv(t, "")
	pod := podWith(func(c *v1.Container) {
		c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(portOf(t, srv.URL))}}}
	})
	require.NoError(t, e.m.UpdatePodStatus(pod, runningStatus(pod, ids, t0)))
	msg := recv(t, e.events)
	assert.True(t, strings.HasPrefix(msg, "ProbeWarning Readiness probe warning: Probe terminated redirects"), msg)
	recv(t, e.syncs)
	assert.True(t, e.m.IsReady(pod, "app", "cri://c1"), "a warning is a success")
}

func TestHostOptionOverridesThePodIP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	e := newNetEnv(t, "127.0.0.1")
	pod := podWith(func(c *v1.Container) {
		c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(portOf(t, srv.URL))}}}
	})
	st := runningStatus(pod, ids, t0)
	st.PodIP = "192.0.2.1" // nothing answers there
	require.NoError(t, e.m.UpdatePodStatus(pod, st))
	recv(t, e.syncs)
	assert.True(t, e.m.IsReady(pod, "app", "cri://c1"))
}
