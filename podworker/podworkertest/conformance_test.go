package podworkertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// simRuntime is an in-memory runtime for testing the conformance suite:
// each container is a goroutine-free record whose behaviour comes from its
// command ("long" exits on SIGTERM, "stubborn" only on SIGKILL, "succeed"
// exits 0 at once). flaws turn it into a runtime that breaks one rule.
type simRuntime struct {
	flaws simFlaws

	mu   sync.Mutex
	seq  int
	pods map[types.UID]*simPod
}

type simFlaws struct {
	restartOnSync      bool          // SyncPod restarts running containers
	killAtOnce         bool          // SyncTerminatingPod ignores the grace period
	leaveOneRunning    bool          // SyncTerminatingPod returns nil with a container running
	forgetOnTerminated bool          // SyncTerminatedPod drops running containers without stopping them
	keepAfterCleanup   bool          // a restarted UID sees its previous life's exited containers
	neverTerminal      bool          // SyncPod never reports terminal
	initAtOnce         bool          // SyncPod starts init and app containers together
	graceInt32         bool          // SyncTerminatingPod converts the grace period through an int32
	ignoresCtx         bool          // SyncTerminatingPod waits the grace period whatever its ctx
	slowSyncPod        time.Duration // SyncPod takes this long, whatever its ctx
}

type simPod struct {
	running  map[string]string // container -> instance ID
	exited   map[string]bool
	policy   v1.RestartPolicy
	behavior map[string]string
	// orphans are containers the runtime lost track of but which still
	// run (forgetOnTerminated).
	orphans map[string]string
}

var _ podworker.RuntimePodSyncer = (*simRuntime)(nil)

func newSimRuntime(f simFlaws) *simRuntime {
	return &simRuntime{flaws: f, pods: map[types.UID]*simPod{}}
}

func (r *simRuntime) podLocked(pod *v1.Pod) *simPod {
	p := r.pods[pod.UID]
	if p == nil {
		p = &simPod{running: map[string]string{}, exited: map[string]bool{}, behavior: map[string]string{}, orphans: map[string]string{}}
		r.pods[pod.UID] = p
	}
	p.policy = pod.Spec.RestartPolicy
	for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		p.behavior[c.Name] = c.Command[0]
	}
	return p
}

func (r *simRuntime) startLocked(p *simPod, name string) {
	if p.behavior[name] == "succeed" {
		p.exited[name] = true
		return
	}
	r.seq++
	p.running[name] = fmt.Sprintf("instance-%d", r.seq)
}

func (r *simRuntime) SyncPod(ctx context.Context, _ podworker.UpdateType, pod, _ *v1.Pod, _ struct{}) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if r.flaws.slowSyncPod > 0 {
		<-time.After(r.flaws.slowSyncPod)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.podLocked(pod)
	for _, c := range pod.Spec.InitContainers {
		if _, running := p.running[c.Name]; running && !r.flaws.initAtOnce {
			return false, nil
		}
		if !p.exited[c.Name] {
			if _, running := p.running[c.Name]; !running {
				r.startLocked(p, c.Name)
			}
			if _, running := p.running[c.Name]; running && !r.flaws.initAtOnce {
				return false, nil
			}
		}
	}
	done := true
	for _, c := range pod.Spec.Containers {
		_, running := p.running[c.Name]
		switch {
		case running && r.flaws.restartOnSync:
			r.startLocked(p, c.Name)
			done = false
		case running:
			done = false
		case !p.exited[c.Name]:
			r.startLocked(p, c.Name)
			done = done && p.exited[c.Name]
		}
	}
	return done && p.policy == v1.RestartPolicyNever && !r.flaws.neverTerminal, nil
}

func (r *simRuntime) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, _ struct{}, grace int64, _ func(*v1.PodStatus)) error {
	if r.flaws.graceInt32 {
		grace = int64(int32(grace))
	}
	if r.flaws.ignoresCtx {
		ctx = context.WithoutCancel(ctx)
	}
	return r.stop(ctx, pod.UID, time.Duration(grace)*time.Second)
}

func (r *simRuntime) stop(ctx context.Context, uid types.UID, grace time.Duration) error {
	r.mu.Lock()
	p := r.pods[uid]
	if p == nil {
		r.mu.Unlock()
		return nil
	}
	// SIGTERM: the containers that honour it exit.
	stubborn := false
	spared := ""
	for name := range p.running {
		if r.flaws.leaveOneRunning && spared == "" {
			spared = name
			continue
		}
		if p.behavior[name] == "stubborn" {
			stubborn = true
		} else {
			delete(p.running, name)
			p.exited[name] = true
		}
	}
	r.mu.Unlock()
	if stubborn && !r.flaws.killAtOnce && grace > 0 {
		t := time.NewTimer(grace)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for name := range p.running {
		if name == spared {
			continue
		}
		delete(p.running, name)
		p.exited[name] = true
	}
	return nil
}

func (r *simRuntime) SyncTerminatedPod(_ context.Context, pod *v1.Pod, _ struct{}) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[pod.UID]
	if p == nil {
		return nil
	}
	if len(p.running) > 0 {
		if !r.flaws.forgetOnTerminated {
			return errors.New("still running")
		}
		for name, id := range p.running {
			p.orphans[name] = id
		}
	}
	if r.flaws.keepAfterCleanup {
		return nil
	}
	if len(p.orphans) > 0 {
		r.pods[pod.UID] = &simPod{running: map[string]string{}, exited: map[string]bool{}, behavior: map[string]string{}, orphans: p.orphans}
		return nil
	}
	delete(r.pods, pod.UID)
	return nil
}

func (r *simRuntime) SyncTerminatingRuntimePod(ctx context.Context, rp podworker.RuntimePod) error {
	return r.stop(ctx, rp.UID, time.Second)
}

// Running is the probe: what runs, including containers the runtime lost.
func (r *simRuntime) Running(_ context.Context, uid types.UID) (map[string]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	if p := r.pods[uid]; p != nil {
		for name, id := range p.running {
			out[name] = id
		}
		for name, id := range p.orphans {
			out[name] = id
		}
	}
	return out, nil
}

func simTarget(f simFlaws) ConformanceTarget[struct{}] {
	rt := newSimRuntime(f)
	return ConformanceTarget[struct{}]{
		Syncer: rt,
		Probe:  rt,
		Containers: ConformanceContainers{
			LongRunning: v1.Container{Command: []string{"long"}},
			IgnoresTerm: v1.Container{Command: []string{"stubborn"}},
			Succeeds:    v1.Container{Command: []string{"succeed"}},
		},
		StartTimeout: time.Second,
		Parallel:     true,
	}
}

func TestRunConformancePassesAConformingRuntime(t *testing.T) {
	RunConformance(t, func(*testing.T) ConformanceTarget[struct{}] { return simTarget(simFlaws{}) })
}

// recorder is a testing.TB that records failures instead of reporting
// them, so a check can be run against a runtime that must fail it. Its
// cleanups run with the real test's.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	skipped  bool
}

func (r *recorder) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, msg)
}
func (r *recorder) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recorder) Error(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) { r.fail(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) FailNow()          { r.fail("FailNow"); runtime.Goexit() }
func (r *recorder) Fail()             { r.fail("Fail") }
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}
func (r *recorder) Skip(args ...any)     { r.skip() }
func (r *recorder) Skipf(string, ...any) { r.skip() }
func (r *recorder) skip() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.failures, "; ")
}

func TestRunConformanceCatchesBrokenRuntimes(t *testing.T) {
	checks := map[string]func(*conformance[struct{}]){}
	for _, c := range conformanceChecks[struct{}]() {
		checks[c.name] = c.run
	}
	cases := []struct {
		flaws simFlaws
		check string
		want  string
	}{
		{simFlaws{restartOnSync: true}, "SyncPodIsIdempotent", "changed the running containers"},
		{simFlaws{neverTerminal: true}, "SyncPodReportsTerminal", "never reported terminal"},
		{simFlaws{killAtOnce: true}, "SyncTerminatingPodRespectsGracePeriod", "was killed before its 2s grace period"},
		{simFlaws{leaveOneRunning: true}, "SyncTerminatingPodStopsEverything", "still run"},
		{simFlaws{leaveOneRunning: true}, "SyncTerminatingRuntimePod", "still run"},
		{simFlaws{forgetOnTerminated: true}, "SyncTerminatedPodBeforeTerminationLeaksNothing", "still run"},
		{simFlaws{keepAfterCleanup: true}, "RestartedUIDStartsClean", "did not run its container again"},
		{simFlaws{initAtOnce: true}, "InitContainersRunInOrder", "[init-1] were not seen running (alone)"},
		{simFlaws{graceInt32: true}, "SyncTerminatingPodWaitsWithTheLongestGracePeriod", "the grace period was not honoured"},
		// The hook would return after its 60s grace period: the check fails
		// at its bound of 300ms + Tolerance (2s) after the call, not then
		// (the message names the bound it gave up at).
		{simFlaws{ignoresCtx: true}, "CancelledContextReturnsPromptly", "did not return within 2.3s"},
	}
	for _, tc := range cases {
		t.Run(tc.check, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				runCheck[struct{}](rec, simTarget(tc.flaws), checks[tc.check])
			}()
			<-done
			if !strings.Contains(rec.text(), tc.want) {
				t.Fatalf("check %s on a runtime with %+v: want a failure containing %q, got %q", tc.check, tc.flaws, tc.want, rec.text())
			}
		})
	}
}

// A syncer that cannot stop runtime pods, whether it lacks the method or
// its hook says it is not implemented (a decorator of a syncer without
// it), has that check skipped, not failed.
func TestRunConformanceSkipsAMissingRuntimeHook(t *testing.T) {
	var check func(*conformance[struct{}])
	for _, c := range conformanceChecks[struct{}]() {
		if c.name == "SyncTerminatingRuntimePod" {
			check = c.run
		}
	}
	for name, wrap := range map[string]func(podworker.PodSyncer[struct{}]) podworker.PodSyncer[struct{}]{
		"without the method": func(s podworker.PodSyncer[struct{}]) podworker.PodSyncer[struct{}] {
			return struct{ podworker.PodSyncer[struct{}] }{s}
		},
		"a decorator of a syncer without it": func(s podworker.PodSyncer[struct{}]) podworker.PodSyncer[struct{}] {
			return podworker.Decorate[struct{}](struct{ podworker.PodSyncer[struct{}] }{s}, podworker.PodSyncerFuncs[struct{}]{})
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{TB: t}
			target := simTarget(simFlaws{})
			target.Syncer = wrap(target.Syncer)
			done := make(chan struct{})
			go func() {
				defer close(done)
				runCheck[struct{}](rec, target, check)
			}()
			<-done
			if !rec.skipped || rec.text() != "" {
				t.Fatalf("skipped %v, failures %q; want skipped and no failure", rec.skipped, rec.text())
			}
		})
	}
}

func TestRunConformanceRejectsAnIncompleteTarget(t *testing.T) {
	for name, target := range map[string]ConformanceTarget[struct{}]{
		"no syncer":     {Probe: newSimRuntime(simFlaws{}), Containers: simTarget(simFlaws{}).Containers},
		"no probe":      {Syncer: newSimRuntime(simFlaws{}), Containers: simTarget(simFlaws{}).Containers},
		"no containers": {Syncer: newSimRuntime(simFlaws{}), Probe: newSimRuntime(simFlaws{})},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := newConformance(t, target); err == nil {
				t.Fatal("an incomplete target was accepted")
			}
		})
	}
}

// The checks the child process runs, each against a runtime that fails it
// in its own way, so that failures come from each layer of the suite: the
// check itself, the plumbing that bounds a hook call (await, through call,
// syncPod and terminate), and a pod's cleanup.
var brokenConformance = map[string]simFlaws{
	// Fails in the check: SyncPod restarts what runs.
	"SyncPodIsIdempotent": {restartOnSync: true},
	// Fails in await (through terminate), then in the cleanup, which finds
	// the call still running: SyncTerminatingPod ignores its context.
	"CancelledContextReturnsPromptly": {ignoresCtx: true},
	// Fails in await (through syncPod and call): SyncPod overruns
	// StartTimeout (1s).
	"SyncTerminatingPodStopsEverything": {slowSyncPod: 2 * time.Second},
}

// TestHelperBrokenConformance is run by
// TestRunConformanceReportsAtTheCallersLine in a child process: it runs the
// suite against runtimes that fail the checks of brokenConformance.
func TestHelperBrokenConformance(t *testing.T) {
	if os.Getenv("PODWORKERTEST_BROKEN_CONFORMANCE") != "1" {
		t.Skip("run by TestRunConformanceReportsAtTheCallersLine")
	}
	_, _, line, _ := runtime.Caller(0)
	fmt.Printf("RunConformance is called at line %d\n", line+2)
	RunConformance(t, func(t *testing.T) ConformanceTarget[struct{}] {
		return simTarget(brokenConformance[path.Base(t.Name())])
	})
}

// A failing check is reported at the line of the test that called
// RunConformance (every function of the suite is a t.Helper), not at a line
// inside the suite: whether the check, the plumbing below it, or a pod's
// cleanup reports it.
func TestRunConformanceReportsAtTheCallersLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	checks := slices.Sorted(maps.Keys(brokenConformance))
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBrokenConformance$/^("+strings.Join(checks, "|")+")$", "-test.v")
	cmd.Env = append(os.Environ(), "PODWORKERTEST_BROKEN_CONFORMANCE=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the broken runtimes fail the suite:\n%s", out)
	m := regexp.MustCompile(`RunConformance is called at line (\d+)`).FindSubmatch(out)
	require.NotNil(t, m, "the child printed its call line:\n%s", out)
	for _, check := range checks {
		assert.Contains(t, string(out), "--- FAIL: TestHelperBrokenConformance/"+check+" ", "the check failed")
	}
	at := regexp.QuoteMeta("conformance_test.go:" + string(m[1]) + ": ")
	for what, failure := range map[string]string{
		"a check":                  `SyncPod\(sync\) changed the running containers`,
		"await, through terminate": `SyncTerminatingPod\(grace 60s\) of \S+ did not return within 2\.3s`,
		"a pod's cleanup":          `cleanup: SyncTerminatingPod\(grace 60s\) of \S+ still runs`,
		"await, through syncPod":   `SyncPod\(create\) of \S+ did not return within 1s`,
	} {
		assert.Regexp(t, at+failure, string(out), "a failure reported by %s is reported at the caller's line", what)
	}
	for _, inside := range []string{"conformance.go:", "conformance_checks.go:", "conformance_calls.go:"} {
		assert.NotContains(t, string(out), inside, "no failure is reported inside the suite")
	}
}
