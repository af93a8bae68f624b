package probe

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/lifecycle/internal/windowtest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var _ PodTermination = (*windowtest.Window)(nil)

// fakeExec is an ExecRunner whose answer tests set; it counts calls.
type fakeExec struct {
	mu     sync.Mutex
	calls  int
	cmds   [][]string
	answer func(ctx context.Context, cmd []string) ([]byte, int, error)
}

func (f *fakeExec) ExecInContainer(ctx context.Context, _ string, cmd []string, _ time.Duration) ([]byte, int, error) {
	f.mu.Lock()
	f.calls++
	f.cmds = append(f.cmds, cmd)
	answer := f.answer
	f.mu.Unlock()
	if answer == nil {
		return nil, 0, nil
	}
	return answer(ctx, cmd)
}

// exit makes every call exit with code and output out.
func (f *fakeExec) exit(code int, out string) {
	f.mu.Lock()
	f.answer = func(context.Context, []string) ([]byte, int, error) { return []byte(out), code, nil }
	f.mu.Unlock()
}

func (f *fakeExec) set(answer func(ctx context.Context, cmd []string) ([]byte, int, error)) {
	f.mu.Lock()
	f.answer = answer
	f.mu.Unlock()
}

func (f *fakeExec) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// recorder collects events and sync requests.
type recorder struct {
	mu     sync.Mutex
	events []string
	syncs  []types.UID
}

func (r *recorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	ref := obj.(*v1.ObjectReference)
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s %s", ref.FieldPath, eventType, reason, fmt.Sprintf(format, args...)))
	r.mu.Unlock()
}

func (r *recorder) requestSync(uid types.UID) {
	r.mu.Lock()
	r.syncs = append(r.syncs, uid)
	r.mu.Unlock()
}

// takeEvents returns the events so far and forgets them.
func (r *recorder) takeEvents() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// takeSyncs returns how many syncs were requested and forgets them.
func (r *recorder) takeSyncs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.syncs)
	r.syncs = nil
	return n
}

// env is a manager under test on a fake clock, with its fakes.
type env struct {
	t      *testing.T
	clk    *clocktesting.FakeClock
	win    *windowtest.Window
	exec   *fakeExec
	rec    *recorder
	m      *Manager
	cancel context.CancelFunc
	done   chan struct{}
}

// newEnv makes a manager (first probes not jittered) and runs it; the
// test's cleanup stops it and waits for Run. Call inside a synctest
// bubble.
func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	e := &env{t: t, clk: clocktesting.NewFakeClock(t0), win: windowtest.New(), exec: &fakeExec{}, rec: &recorder{}}
	if opts.Exec == nil {
		opts.Exec = e.exec
	}
	opts.Clock = e.clk
	if opts.Recorder == nil {
		opts.Recorder = e.rec
	}
	if opts.RequestSync == nil {
		opts.RequestSync = e.rec.requestSync
	}
	m, err := New(e.win, opts)
	if err != nil {
		t.Fatal(err)
	}
	m.jitter = func(time.Duration) time.Duration { return 0 }
	e.m = m
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan struct{})
	go func() {
		defer close(e.done)
		_ = m.Run(ctx)
	}()
	t.Cleanup(e.stop)
	return e
}

// stop ends Run and waits for it.
func (e *env) stop() {
	e.cancel()
	<-e.done
}

// step moves the fake clock on by d, letting the manager act on what
// came due before and after.
func (e *env) step(d time.Duration) {
	waitIdle()
	e.clk.Step(d)
	waitIdle()
}

// sync is what a runtime's SyncPod does with the manager: build the
// status of pod's containers (running since startedAt, with IDs) and pass
// it to UpdatePodStatus; it returns the status.
func (e *env) sync(pod *v1.Pod, ids map[string]string, startedAt time.Time) *v1.PodStatus {
	e.t.Helper()
	st := runningStatus(pod, ids, startedAt)
	if err := e.m.UpdatePodStatus(pod, st); err != nil {
		e.t.Fatalf("UpdatePodStatus: %v", err)
	}
	waitIdle()
	return st
}

// runningStatus builds the status a runtime reports for pod: each
// container of ids running since startedAt with its ID, phase Running.
func runningStatus(pod *v1.Pod, ids map[string]string, startedAt time.Time) *v1.PodStatus {
	st := &v1.PodStatus{Phase: v1.PodRunning, PodIP: "127.0.0.1"}
	for _, c := range pod.Spec.Containers {
		cs := v1.ContainerStatus{Name: c.Name, ContainerID: ids[c.Name]}
		if cs.ContainerID != "" {
			cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}
		} else {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	for _, c := range pod.Spec.InitContainers {
		cs := v1.ContainerStatus{Name: c.Name, ContainerID: ids[c.Name]}
		if cs.ContainerID != "" {
			cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	return st
}

// execProbe is an exec probe with the given period and thresholds.
func execProbe(period, success, failure int32) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}},
		PeriodSeconds:    period,
		SuccessThreshold: success,
		FailureThreshold: failure,
	}
}

// podWith returns pod "web" (UID "u1") with one container "app" set up
// by edit.
func podWith(edit func(c *v1.Container)) *v1.Pod {
	c := v1.Container{Name: "app", Image: "app"}
	if edit != nil {
		edit(&c)
	}
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{c}, TerminationGracePeriodSeconds: &grace},
	}
}

func ready(st *v1.PodStatus, name string) bool {
	for _, cs := range st.ContainerStatuses {
		if cs.Name == name {
			return cs.Ready
		}
	}
	for _, cs := range st.InitContainerStatuses {
		if cs.Name == name {
			return cs.Ready
		}
	}
	panic("no status for " + name)
}

func started(st *v1.PodStatus, name string) bool {
	for _, cs := range append(append([]v1.ContainerStatus{}, st.ContainerStatuses...), st.InitContainerStatuses...) {
		if cs.Name == name {
			return cs.Started != nil && *cs.Started
		}
	}
	panic("no status for " + name)
}

func condition(st *v1.PodStatus, t v1.PodConditionType) v1.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}

// callsOf returns how many calls ran the command whose first word is w.
func (f *fakeExec) callsOf(w string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.cmds {
		if len(c) > 0 && c[0] == w {
			n++
		}
	}
	return n
}

// waitIdle waits until every goroutine of the test's bubble is blocked:
// the manager has acted on everything that was due.
func waitIdle() { synctest.Wait() }

func intstrFrom(p int32) intstr.IntOrString  { return intstr.FromInt32(p) }
func intstrName(n string) intstr.IntOrString { return intstr.FromString(n) }
