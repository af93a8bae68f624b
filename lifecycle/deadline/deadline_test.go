package deadline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/lifecycle/internal/windowtest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type calls struct {
	mu     sync.Mutex
	syncs  []types.UID
	events []string
}

func (c *calls) requestSync(uid types.UID) {
	c.mu.Lock()
	c.syncs = append(c.syncs, uid)
	c.mu.Unlock()
}

func (c *calls) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	c.mu.Lock()
	c.events = append(c.events, fmt.Sprintf("%s %s %s %s", obj.(*v1.Pod).Name, eventType, reason, fmt.Sprintf(format, args...)))
	c.mu.Unlock()
}

func (c *calls) takeSyncs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.syncs)
	c.syncs = nil
	return n
}

func (c *calls) takeEvents() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.events
	c.events = nil
	return e
}

func pod(ads *int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{ActiveDeadlineSeconds: ads}}
}

func i64(v int64) *int64 { return &v }

func TestCheck(t *testing.T) {
	start := metav1.NewTime(t0)
	future := metav1.NewTime(t0.Add(time.Hour))
	for _, tc := range []struct {
		name  string
		ads   *int64
		start *metav1.Time
		now   time.Duration // after t0
		want  bool
	}{
		{"no deadline", nil, &start, time.Hour, false},
		{"not started", i64(10), nil, time.Hour, false},
		{"zero start time", i64(10), &metav1.Time{}, time.Hour, false},
		{"before the deadline", i64(30), &start, 29 * time.Second, false},
		{"at the deadline", i64(30), &start, 30 * time.Second, true},
		{"after it", i64(30), &start, time.Hour, true},
		{"zero deadline is past at once", i64(0), &start, 0, true},
		{"negative deadline is past at once", i64(-5), &start, 0, true},
		{"a start in the future is not past", i64(10), &future, 0, false},
		{"a deadline beyond a century is never reached", i64(1 << 62), &start, 200 * 365 * 24 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0.Add(tc.now))
			m, err := New(windowtest.New(), Options{Clock: clk})
			require.NoError(t, err)
			got, err := m.Check(pod(tc.ads), tc.start)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// env runs a manager on a fake clock in a bubble.
type env struct {
	clk *clocktesting.FakeClock
	win *windowtest.Window
	c   *calls
	m   *Manager
}

func newEnv(t *testing.T) *env {
	e := &env{clk: clocktesting.NewFakeClock(t0), win: windowtest.New(), c: &calls{}}
	m, err := New(e.win, Options{Clock: e.clk, RequestSync: e.c.requestSync, Recorder: e.c})
	require.NoError(t, err)
	e.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(t, m.Run(ctx))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return e
}

func (e *env) step(d time.Duration) {
	synctest.Wait()
	e.clk.Step(d)
	synctest.Wait()
}

func TestTheTimerAsksForASyncAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		p := pod(i64(30))
		start := metav1.NewTime(t0)
		past, err := e.m.Check(p, &start)
		require.NoError(t, err)
		assert.False(t, past)
		e.step(29 * time.Second)
		assert.Zero(t, e.c.takeSyncs())
		e.step(time.Second)
		assert.Equal(t, 1, e.c.takeSyncs(), "the deadline passed: sync the pod")
		assert.Empty(t, e.c.takeEvents(), "the sync decides, not the timer")

		past, _ = e.m.Check(p, &start) // the sync it asked for
		assert.True(t, past)
		assert.Equal(t, []string{"job Normal DeadlineExceeded Pod was active on the node longer than the specified deadline"}, e.c.takeEvents())

		e.step(RetryInterval)
		assert.Equal(t, 1, e.c.takeSyncs(), "asked again while the pod runs on")
		past, _ = e.m.Check(p, &start)
		assert.True(t, past)
		assert.Empty(t, e.c.takeEvents(), "the event is recorded once")

		e.win.Terminate(p.UID) // the pod workers stop it
		past, _ = e.m.Check(p, &start)
		assert.True(t, past, "the final status keeps the answer")
		e.step(RetryInterval)
		assert.Zero(t, e.c.takeSyncs())
		assert.Zero(t, e.m.sched.Len(), "a stopping pod is not timed")
	})
}

func TestAShortenedDeadlineCountsFromTheNextSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		start := metav1.NewTime(t0)
		_, _ = e.m.Check(pod(i64(600)), &start)
		e.step(5 * time.Second)
		past, _ := e.m.Check(pod(i64(20)), &start) // the spec changed; the change brought a sync
		assert.False(t, past)
		e.step(15 * time.Second)
		assert.Equal(t, 1, e.c.takeSyncs(), "the timer follows the shortened deadline")

		// A deadline lengthened (no API server allows it; a file source
		// might) moves the timer later: nothing fires at the old time.
		e2 := pod(i64(100))
		e2.UID = "u2"
		_, _ = e.m.Check(e2, &start)
		e2.Spec.ActiveDeadlineSeconds = i64(1000)
		_, _ = e.m.Check(e2, &start)
		e.step(100 * time.Second)
		assert.Equal(t, 1, e.c.takeSyncs(), "only u1's retry")
		past, _ = e.m.Check(pod(i64(5)), &start)
		assert.True(t, past, "shortened to the past: past at once")
	})
}

func TestAPodThatStopsIsNotTimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		start := metav1.NewTime(t0)
		p := pod(i64(30))
		e.win.Terminate(p.UID)
		past, _ := e.m.Check(p, &start)
		assert.False(t, past)
		assert.Zero(t, e.m.sched.Len(), "no timer for a pod already stopping")

		e.win.Run(p.UID)
		_, _ = e.m.Check(p, &start)
		e.win.Stop(p.UID) // gone (deleted, or unknown to the workers)
		e.step(30 * time.Second)
		assert.Zero(t, e.c.takeSyncs(), "a timer for a pod that cannot run asks for nothing")
		assert.Zero(t, e.m.sched.Len())

		e.win.Run(p.UID)
		past, _ = e.m.Check(p, &start)
		assert.True(t, past)
		assert.Len(t, e.c.takeEvents(), 1)
		e.m.Forget(p.UID)
		e.m.Forget("never-seen")
		e.step(time.Hour)
		assert.Zero(t, e.c.takeSyncs(), "Forget drops the timer")
		assert.Zero(t, e.m.sched.Len())
	})
}

func TestPanickingCallbacksAreSurvived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		m, err := New(windowtest.New(), Options{
			Clock:       clk,
			RequestSync: func(types.UID) { panic("sync bug") },
			Recorder:    panicky{},
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = m.Run(ctx); close(done) }()
		start := metav1.NewTime(t0)
		_, _ = m.Check(pod(i64(1)), &start)
		synctest.Wait()
		clk.Step(time.Second)
		synctest.Wait()
		past, err := m.Check(pod(i64(1)), &start)
		assert.NoError(t, err)
		assert.True(t, past)
		clk.Step(RetryInterval)
		synctest.Wait()
		assert.Equal(t, 1, m.sched.Len(), "Run goes on")
		cancel()
		<-done
	})
}

type panicky struct{}

func (panicky) Eventf(runtime.Object, string, string, string, ...any) { panic("recorder bug") }

func TestBadInput(t *testing.T) {
	_, err := New(nil, Options{})
	assert.EqualError(t, err, "deadline: New needs a PodTermination (the pod workers), got nil")
	m, err := New(windowtest.New(), Options{})
	require.NoError(t, err)
	_, err = m.Check(nil, nil)
	assert.EqualError(t, err, "deadline: Check needs a pod, got nil")
	p := pod(i64(1))
	p.UID = ""
	_, err = m.Check(p, nil)
	assert.EqualError(t, err, "deadline: Check: pod ns/job has no UID")
	MarkFailed(nil)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.NoError(t, m.Run(ctx))
	assert.EqualError(t, m.Run(ctx), "deadline: Run called twice")
}

func TestMarkFailed(t *testing.T) {
	st := &v1.PodStatus{Phase: v1.PodRunning}
	MarkFailed(st)
	MarkFailed(st)
	assert.Equal(t, v1.PodStatus{Phase: v1.PodFailed, Reason: "DeadlineExceeded", Message: "Pod was active on the node longer than the specified deadline"}, *st)
}
