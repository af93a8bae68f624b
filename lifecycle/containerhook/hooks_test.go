package containerhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// events collects recorded events as "fieldPath-or-pod type reason msg".
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	where := "pod"
	if ref, ok := obj.(*v1.ObjectReference); ok {
		where = ref.FieldPath
	}
	e.mu.Lock()
	e.got = append(e.got, fmt.Sprintf("%s %s %s %s", where, eventType, reason, fmt.Sprintf(format, args...)))
	e.mu.Unlock()
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.got
	e.got = nil
	return g
}

// target returns a container named "app" of pod "web" with the given
// hooks.
func target(postStart, preStop *v1.LifecycleHandler) Container {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:      "app",
			Lifecycle: &v1.Lifecycle{PostStart: postStart, PreStop: preStop},
		}}},
	}
	return Container{Pod: pod, Name: "app", ID: "cri://c1", Host: "127.0.0.1"}
}

func execHook(cmd ...string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func sleepHook(s int64) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: s}}
}

// exitWith is a runner whose commands exit with code and print out.
func exitWith(code int, out string) ExecRunner {
	return ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
		return []byte(out), code, nil
	})
}

func httpHook(t *testing.T, h http.HandlerFunc) *v1.LifecycleHandler {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	_, p, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	port, _ := strconv.Atoi(p)
	return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/hook", Port: intstr.FromInt(port)}}
}

func TestPostStart(t *testing.T) {
	pod := `"web_ns(u1)"`
	for _, tc := range []struct {
		name   string
		hook   func(t *testing.T) *v1.LifecycleHandler
		exec   ExecRunner
		failed string // the HookError's message; "" for a success
	}{
		{"no hook", func(*testing.T) *v1.LifecycleHandler { return nil }, nil, ""},
		{"exec succeeds", func(*testing.T) *v1.LifecycleHandler { return execHook("touch", "/tmp/x") }, exitWith(0, ""), ""},
		{"exec fails", func(*testing.T) *v1.LifecycleHandler { return execHook("sh", "-c", "exit 1") }, exitWith(1, "oops"),
			`Exec lifecycle hook ([sh -c exit 1]) for Container "app" in Pod ` + pod + ` failed - error: command 'sh -c exit 1' exited with 1: oops, message: "oops"`},
		{"exec cannot run", func(*testing.T) *v1.LifecycleHandler { return execHook("x") },
			ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
				return nil, 0, errors.New("no such container")
			}),
			`Exec lifecycle hook ([x]) for Container "app" in Pod ` + pod + ` failed - error: no such container, message: ""`},
		{"exec runner panics", func(*testing.T) *v1.LifecycleHandler { return execHook("x") },
			ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) { panic("bug") }),
			`Exec lifecycle hook ([x]) for Container "app" in Pod ` + pod + ` failed - error: exec runner panicked: bug, message: ""`},
		{"no exec runner", func(*testing.T) *v1.LifecycleHandler { return execHook("x") }, nil,
			`Exec lifecycle hook ([x]) for Container "app" in Pod ` + pod + ` failed - error: no exec runner: the runtime gave none for exec actions, message: ""`},
		{"http answered, whatever the status", func(t *testing.T) *v1.LifecycleHandler {
			return httpHook(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
		}, nil, ""},
		{"http refused", func(t *testing.T) *v1.LifecycleHandler {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			port := l.Addr().(*net.TCPAddr).Port
			require.NoError(t, l.Close())
			return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/start", Port: intstr.FromInt(port)}}
		}, nil, `HTTP lifecycle hook (/start) for Container "app" in Pod ` + pod + ` failed - error: `},
		{"sleep 0", func(*testing.T) *v1.LifecycleHandler { return sleepHook(0) }, nil, ""},
		{"negative sleep", func(*testing.T) *v1.LifecycleHandler { return sleepHook(-1) }, nil,
			`Sleep lifecycle hook (-1) for Container "app" in Pod ` + pod + ` failed - error: sleep seconds is -1; want 0 or more`},
		{"tcpSocket is not a hook", func(*testing.T) *v1.LifecycleHandler {
			return &v1.LifecycleHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(80)}}
		}, nil, "Cannot run handler: invalid handler: tcpSocket is not supported as a lifecycle hook"},
		{"no action", func(*testing.T) *v1.LifecycleHandler { return &v1.LifecycleHandler{} }, nil,
			"Cannot run handler: invalid handler: no action is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			r := New(Options{Exec: tc.exec, Recorder: &ev})
			err := r.PostStart(context.Background(), target(tc.hook(t), nil))
			r.Wait()
			if tc.failed == "" {
				assert.NoError(t, err)
				assert.Empty(t, ev.take())
				return
			}
			require.ErrorIs(t, err, ErrPostStartHook)
			assert.NotErrorIs(t, err, ErrPreStopHook)
			var he *HookError
			require.ErrorAs(t, err, &he)
			assert.Equal(t, "PostStartHookError", he.Reason)
			assert.Contains(t, he.Message, tc.failed)
			assert.Equal(t, []string{"spec.containers{app} Warning FailedPostStartHook PostStartHook failed"}, ev.take(),
				"the event holds no output")
		})
	}
}

func TestPostStartCutByCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		r := New(Options{Recorder: &ev, Exec: ExecRunnerFunc(func(ctx context.Context, _ string, _ []string, timeout time.Duration) ([]byte, int, error) {
			assert.Zero(t, timeout, "a hook's command has no timeout of its own")
			<-ctx.Done()
			return nil, 0, ctx.Err()
		})})
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() { got <- r.PostStart(ctx, target(execHook("wait"), nil)) }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("PostStart returned while its hook runs")
		default:
		}
		cancel() // the pod's termination started
		err := <-got
		assert.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, ErrPostStartHook)
		assert.Empty(t, ev.take())
		r.Wait()
	})
}

func TestHTTPSHookAnsweredInHTTPFallsBack(t *testing.T) {
	var ev events
	r := New(Options{Recorder: &ev})
	h := httpHook(t, func(http.ResponseWriter, *http.Request) {})
	h.HTTPGet.Scheme = v1.URISchemeHTTPS
	require.NoError(t, r.PostStart(context.Background(), target(h, nil)))
	got := ev.take()
	require.Len(t, got, 1)
	assert.Regexp(t, `^pod Warning LifecycleHTTPFallback request to HTTPS lifecycle hook 127.0.0.1 got HTTP response, retry with HTTP succeeded$`, got[0])
}

func TestBadInput(t *testing.T) {
	r := New(Options{})
	assert.EqualError(t, r.PostStart(context.Background(), Container{Name: "app"}), "containerhook: PostStart needs a pod, got nil")
	c := target(nil, nil)
	c.Name = "nope"
	assert.EqualError(t, r.PostStart(context.Background(), c), `containerhook: PostStart: pod ns/web has no container "nope"`)
	left, err := r.PreStop(context.Background(), c, 30)
	assert.EqualError(t, err, `containerhook: PreStop: pod ns/web has no container "nope"`)
	assert.Equal(t, int64(30), left)
	left, err = r.PreStop(context.Background(), Container{}, 30)
	assert.Error(t, err)
	assert.Equal(t, int64(30), left)
}

func TestPreStopDeductsTheTimeItTook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		r := New(Options{Clock: clk})
		got := make(chan int64, 1)
		go func() {
			left, err := r.PreStop(context.Background(), target(nil, sleepHook(3)), 10)
			assert.NoError(t, err)
			got <- left
		}()
		synctest.Wait()
		clk.Step(2 * time.Second)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("a 3s sleep hook returned after 2s")
		default:
		}
		clk.Step(time.Second)
		assert.Equal(t, int64(7), <-got)
	})
}

func TestPreStopTruncatesToWholeSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		release := make(chan struct{})
		r := New(Options{Clock: clk, Exec: ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			<-release
			return nil, 0, nil
		})})
		got := make(chan int64, 1)
		go func() {
			left, err := r.PreStop(context.Background(), target(nil, execHook("drain")), 10)
			assert.NoError(t, err)
			got <- left
		}()
		synctest.Wait()
		clk.Step(2500 * time.Millisecond)
		close(release)
		assert.Equal(t, int64(8), <-got, "2.5s taken: 2 whole seconds deducted")
	})
}

// A preStop hook whose runner ignores its ctx is cut at the grace period:
// PreStop returns then, with nothing left and no event, and Wait waits for
// the abandoned call.
func TestPreStopIsCutAtTheGracePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		var ev events
		release := make(chan struct{})
		r := New(Options{Clock: clk, Recorder: &ev, Exec: ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			<-release
			return nil, 0, nil
		})})
		got := make(chan int64, 1)
		go func() {
			left, err := r.PreStop(context.Background(), target(nil, execHook("hang")), 5)
			assert.NoError(t, err)
			got <- left
		}()
		synctest.Wait()
		clk.Step(5 * time.Second)
		assert.Equal(t, int64(0), <-got)
		assert.Empty(t, ev.take())
		waited := make(chan struct{})
		go func() {
			r.Wait()
			close(waited)
		}()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("Wait returned while the abandoned call runs")
		default:
		}
		close(release)
		<-waited
	})
}

func TestPreStopSleepLongerThanTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		var ev events
		r := New(Options{Clock: clk, Recorder: &ev})
		got := make(chan int64, 1)
		go func() {
			left, err := r.PreStop(context.Background(), target(nil, sleepHook(600)), 30)
			assert.NoError(t, err)
			got <- left
		}()
		synctest.Wait()
		clk.Step(30 * time.Second)
		assert.Equal(t, int64(0), <-got)
		assert.Empty(t, ev.take(), "a hook cut by the grace period did not fail")
	})
}

func TestPreStopFailure(t *testing.T) {
	var ev events
	r := New(Options{Recorder: &ev, Exec: exitWith(2, "busy")})
	left, err := r.PreStop(context.Background(), target(nil, execHook("drain")), 30)
	assert.Equal(t, int64(30), left)
	require.ErrorIs(t, err, ErrPreStopHook)
	assert.NotErrorIs(t, err, ErrPostStartHook)
	assert.Contains(t, err.Error(), "PreStopHookError: Exec lifecycle hook ([drain])")
	assert.Equal(t, []string{"spec.containers{app} Warning FailedPreStopHook PreStopHook failed"}, ev.take())
}

func TestPreStopNotRunWithoutGraceOrHook(t *testing.T) {
	calls := 0
	r := New(Options{Exec: ExecRunnerFunc(func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
		calls++
		return nil, 0, nil
	})})
	left, err := r.PreStop(context.Background(), target(nil, execHook("drain")), 0)
	assert.NoError(t, err)
	assert.Zero(t, left)
	left, err = r.PreStop(context.Background(), target(nil, nil), 30)
	assert.NoError(t, err)
	assert.Equal(t, int64(30), left)
	assert.Zero(t, calls)
}

func TestPreStopCutByCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		var ev events
		r := New(Options{Clock: clk, Recorder: &ev})
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() {
			_, err := r.PreStop(ctx, target(nil, sleepHook(60)), 30)
			got <- err
		}()
		synctest.Wait()
		cancel() // the grace period was shortened: SyncTerminatingPod runs again
		err := <-got
		assert.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, ev.take())
	})
}

func TestPanickingRecorderIsSurvived(t *testing.T) {
	r := New(Options{Exec: exitWith(1, ""), Recorder: panicky{}})
	assert.ErrorIs(t, r.PostStart(context.Background(), target(execHook("x"), nil)), ErrPostStartHook)
}

type panicky struct{}

func (panicky) Eventf(runtime.Object, string, string, string, ...any) { panic("recorder bug") }
