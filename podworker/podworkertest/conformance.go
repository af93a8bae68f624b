package podworkertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// Probe tells which containers of a pod run. A runtime's test implements it
// as independently of the syncer's own bookkeeping as the runtime allows:
// from the process table for a process runtime, from the CRI's container
// list for a CRI syncer. It is called from the test's goroutines, possibly
// concurrently.
type Probe interface {
	// Running returns, for each container of the pod with this UID that
	// runs now, an ID of its current instance (a process ID with its start
	// time, a CRI container ID): one that changes whenever the container is
	// started again. Containers that do not run are absent; a pod the
	// runtime does not know yields an empty map and no error.
	Running(ctx context.Context, uid types.UID) (map[string]string, error)
}

// ProbeFunc adapts a function to Probe.
type ProbeFunc func(ctx context.Context, uid types.UID) (map[string]string, error)

// Running calls f.
func (f ProbeFunc) Running(ctx context.Context, uid types.UID) (map[string]string, error) {
	return f(ctx, uid)
}

// ConformanceContainers are the containers RunConformance builds its pods
// from: one of each behaviour the contract needs, in the runtime's terms (a
// command for a process runtime, an image and a command for a CRI one).
// The suite sets each container's name; the rest is used as given.
type ConformanceContainers struct {
	// LongRunning runs until stopped and exits promptly on SIGTERM, for
	// example `sleep 3600`.
	LongRunning v1.Container
	// IgnoresTerm runs until stopped and ignores SIGTERM, so only SIGKILL
	// stops it, for example `sh -c 'trap "" TERM; while :; do sleep 1; done'`.
	IgnoresTerm v1.Container
	// Succeeds exits with code 0 soon after it starts, for example `true`.
	Succeeds v1.Container
}

// ConformanceTarget is one runtime under test, made fresh by the factory
// for each check of RunConformance.
type ConformanceTarget[T any] struct {
	// Syncer is the PodSyncer under test. Required. When it also
	// implements podworker.RuntimePodSyncer, that hook is checked too.
	Syncer podworker.PodSyncer[T]
	// Status, when set, gives each hook the pod's status, read just before
	// the call as the engine does. Defaults to none: hooks get the zero T.
	Status podworker.StatusSource[T]
	// Probe says which containers run. Required.
	Probe Probe
	// Containers are the behaviours the checks build pods from. Required:
	// each needs at least a command or an image.
	Containers ConformanceContainers
	// PreparePod, when set, is applied to every pod the suite builds before
	// it is used (to set a node name, a runtime class, annotations...).
	PreparePod func(*v1.Pod)
	// StartTimeout is how long a started container may take to be seen
	// running by the Probe, and a finishing pod to be reported terminal.
	// Defaults to 10 seconds.
	StartTimeout time.Duration
	// Tolerance is how far a hook may overrun what the contract allows it:
	// the grace period, or returning after its context is cancelled.
	// Defaults to 2 seconds.
	Tolerance time.Duration
	// Parallel runs this check in parallel with the others (t.Parallel).
	// Leave it false when targets cannot coexist.
	Parallel bool
}

// RunConformance checks a PodSyncer against the contract every runtime
// must honour, as subtests of t. factory is called once per subtest, on its
// *testing.T, and must return a fresh target; register cleanups (closing
// the runtime, removing its directory) with that t.Cleanup. Every pod the
// suite starts is terminated and cleaned up by the suite, also when a
// check fails, so the factory's cleanups run with nothing left running.
//
// The checks, each on its own pod (or pods) with fresh UIDs:
//   - SyncPod is idempotent: calling it again, as the engine's resyncs and
//     updates do, neither restarts nor duplicates running containers, and
//     it returns without waiting for them to exit;
//   - SyncPod reports terminal once every container exited for good
//     (restartPolicy Never);
//   - SyncTerminatingPod leaves nothing running, returns promptly when the
//     containers exit on SIGTERM, and respects the grace period within
//     Tolerance for one that ignores SIGTERM: not killed early, not waited
//     for much longer; calling it again after success is a prompt no-op;
//   - a cancelled context makes SyncPod and SyncTerminatingPod return
//     within Tolerance, even with a long grace period, and a retry then
//     stops everything;
//   - SyncTerminatedPod is idempotent, and cleaning up a pod whose
//     termination has not run leaks nothing: it either fails and leaves
//     the containers to SyncTerminatingPod, or stops them itself;
//   - a UID that went through its whole life starts clean when synced
//     again: its containers run again as new instances;
//   - SyncTerminatingRuntimePod, when implemented, stops a pod known only
//     by its identity, and is idempotent.
//
// Timing checks use the wall clock, so run the suite with the real clock.
func RunConformance[T any](t *testing.T, factory func(t *testing.T) ConformanceTarget[T]) {
	t.Helper()
	for _, c := range conformanceChecks[T]() {
		t.Run(c.name, func(t *testing.T) {
			target := factory(t)
			if target.Parallel {
				t.Parallel()
			}
			runCheck(t, target, c.run)
		})
	}
}

type conformanceCheck[T any] struct {
	name string
	run  func(*conformance[T])
}

func conformanceChecks[T any]() []conformanceCheck[T] {
	return []conformanceCheck[T]{
		{"SyncPodIsIdempotent", (*conformance[T]).syncPodIdempotent},
		{"SyncPodReportsTerminal", (*conformance[T]).syncPodTerminal},
		{"SyncTerminatingPodStopsEverything", (*conformance[T]).terminatingStops},
		{"SyncTerminatingPodRespectsGracePeriod", (*conformance[T]).terminatingGrace},
		{"CancelledContextReturnsPromptly", (*conformance[T]).cancelled},
		{"SyncTerminatedPodIsIdempotent", (*conformance[T]).terminatedIdempotent},
		{"SyncTerminatedPodBeforeTerminationLeaksNothing", (*conformance[T]).terminatedEarly},
		{"RestartedUIDStartsClean", (*conformance[T]).restartedUID},
		{"SyncTerminatingRuntimePod", (*conformance[T]).runtimePod},
	}
}

// runCheck runs one check on target, reporting to t.
func runCheck[T any](t testing.TB, target ConformanceTarget[T], run func(*conformance[T])) {
	t.Helper()
	s, err := newConformance(t, target)
	if err != nil {
		t.Fatalf("conformance target: %v", err)
	}
	run(s)
}

// conformance is the state of one check.
type conformance[T any] struct {
	t testing.TB
	ConformanceTarget[T]
}

func newConformance[T any](t testing.TB, target ConformanceTarget[T]) (*conformance[T], error) {
	switch {
	case target.Syncer == nil:
		return nil, errors.New("Syncer is required")
	case target.Probe == nil:
		return nil, errors.New("Probe is required")
	}
	for name, c := range map[string]v1.Container{"LongRunning": target.Containers.LongRunning, "IgnoresTerm": target.Containers.IgnoresTerm, "Succeeds": target.Containers.Succeeds} {
		if len(c.Command) == 0 && c.Image == "" {
			return nil, fmt.Errorf("Containers.%s needs a command or an image", name)
		}
	}
	if target.StartTimeout <= 0 {
		target.StartTimeout = 10 * time.Second
	}
	if target.Tolerance <= 0 {
		target.Tolerance = 2 * time.Second
	}
	return &conformance[T]{t: t, ConformanceTarget: target}, nil
}

// pod builds a pod with the given containers (name -> behaviour) and
// registers its termination and cleanup for the end of the check.
func (s *conformance[T]) pod(policy v1.RestartPolicy, init []namedContainer, containers ...namedContainer) *v1.Pod {
	s.t.Helper()
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "conformance-" + suffix,
			Namespace: "podkit-conformance",
			UID:       types.UID("conformance-" + suffix + fmt.Sprintf("-%08x", rand.Uint32())),
		},
		Spec: v1.PodSpec{RestartPolicy: policy},
	}
	for _, c := range init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c.container())
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, c.container())
	}
	if s.PreparePod != nil {
		s.PreparePod(pod)
	}
	s.t.Cleanup(func() { s.cleanup(pod) })
	return pod
}

type namedContainer struct {
	name string
	c    v1.Container
}

func (n namedContainer) container() v1.Container {
	c := *n.c.DeepCopy()
	c.Name = n.name
	return c
}

func (s *conformance[T]) long(name string) namedContainer {
	return namedContainer{name, s.Containers.LongRunning}
}
func (s *conformance[T]) stubborn(name string) namedContainer {
	return namedContainer{name, s.Containers.IgnoresTerm}
}
func (s *conformance[T]) succeeds(name string) namedContainer {
	return namedContainer{name, s.Containers.Succeeds}
}

// cleanup stops and removes a pod whatever state the check left it in.
func (s *conformance[T]) cleanup(pod *v1.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*s.StartTimeout)
	defer cancel()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.Syncer.SyncTerminatingPod(ctx, pod, s.status(ctx, pod.UID), 1, nil); err == nil {
			break
		}
	}
	if err != nil {
		s.t.Errorf("cleanup: SyncTerminatingPod of %s keeps failing: %v", pod.Name, err)
		return
	}
	if err := s.Syncer.SyncTerminatedPod(ctx, pod, s.status(ctx, pod.UID)); err != nil {
		s.t.Errorf("cleanup: SyncTerminatedPod of %s: %v", pod.Name, err)
	}
}

// status reads the pod's status as the engine would before a hook.
func (s *conformance[T]) status(ctx context.Context, uid types.UID) T {
	var zero T
	if s.Status == nil {
		return zero
	}
	st, err := s.Status.PodStatus(ctx, uid, time.Time{})
	if err != nil {
		s.t.Errorf("StatusSource.PodStatus(%s): %v", uid, err)
		return zero
	}
	return st
}

func (s *conformance[T]) running(uid types.UID) map[string]string {
	s.t.Helper()
	got, err := s.Probe.Running(context.Background(), uid)
	if err != nil {
		s.t.Fatalf("Probe.Running(%s): %v", uid, err)
	}
	return got
}

// waitRunning polls the probe until exactly the named containers run, and
// returns their instance IDs.
func (s *conformance[T]) waitRunning(uid types.UID, names ...string) map[string]string {
	s.t.Helper()
	want := slices.Sorted(slices.Values(names))
	var got map[string]string
	ok := s.poll(s.StartTimeout, func() bool {
		got = s.running(uid)
		return slices.Equal(slices.Sorted(maps.Keys(got)), want)
	})
	if !ok {
		s.t.Fatalf("containers %v of pod %s were not seen running within %v; running: %v", want, uid, s.StartTimeout, got)
	}
	return got
}

func (s *conformance[T]) requireNothingRunning(uid types.UID, after string) {
	s.t.Helper()
	if got := s.running(uid); len(got) > 0 {
		s.t.Fatalf("after %s, containers of pod %s still run: %v", after, uid, got)
	}
}

// poll calls cond every 20ms until it holds or timeout passes.
func (s *conformance[T]) poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return cond()
		}
	}
}

// syncPod calls SyncPod with a fresh status and requires it to succeed.
func (s *conformance[T]) syncPod(ut podworker.UpdateType, pod *v1.Pod) bool {
	s.t.Helper()
	ctx := context.Background()
	terminal, err := s.Syncer.SyncPod(ctx, ut, pod, nil, s.status(ctx, pod.UID))
	if err != nil {
		s.t.Fatalf("SyncPod(%s) of %s: %v", ut, pod.Name, err)
	}
	return terminal
}

// terminate calls SyncTerminatingPod and returns how long it took.
func (s *conformance[T]) terminate(ctx context.Context, pod *v1.Pod, grace int64) (time.Duration, error) {
	// The status is read with a live context: a check that hands the hook a
	// cancelled one is testing the hook, not the StatusSource.
	st := s.status(context.Background(), pod.UID)
	start := time.Now()
	err := s.Syncer.SyncTerminatingPod(ctx, pod, st, grace, nil)
	return time.Since(start), err
}

func (s *conformance[T]) syncPodIdempotent() {
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"), s.long("b"))
	start := time.Now()
	if s.syncPod(podworker.SyncPodCreate, pod) {
		s.t.Fatal("SyncPod reported a pod of long-running containers terminal")
	}
	if d := time.Since(start); d > s.StartTimeout {
		s.t.Fatalf("SyncPod took %v: it must start containers, not wait for them", d)
	}
	first := s.waitRunning(pod.UID, "a", "b")
	for _, ut := range []podworker.UpdateType{podworker.SyncPodSync, podworker.SyncPodUpdate, podworker.SyncPodSync} {
		if s.syncPod(ut, pod) {
			s.t.Fatalf("SyncPod(%s) reported a running pod terminal", ut)
		}
		if got := s.running(pod.UID); !maps.Equal(got, first) {
			s.t.Fatalf("SyncPod(%s) changed the running containers: before %v, after %v", ut, first, got)
		}
	}
}

func (s *conformance[T]) syncPodTerminal() {
	pod := s.pod(v1.RestartPolicyNever, []namedContainer{s.succeeds("init")}, s.succeeds("a"), s.succeeds("b"))
	ok := s.poll(3*s.StartTimeout, func() bool { return s.syncPod(podworker.SyncPodSync, pod) })
	if !ok {
		s.t.Fatalf("SyncPod never reported terminal a pod whose containers all exited under restartPolicy Never")
	}
	s.requireNothingRunning(pod.UID, "SyncPod reported the pod terminal")
	if _, err := s.terminate(context.Background(), pod, 30); err != nil {
		s.t.Fatalf("SyncTerminatingPod of a finished pod: %v", err)
	}
}

func (s *conformance[T]) terminatingStops() {
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"), s.long("b"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "a", "b")
	took, err := s.terminate(context.Background(), pod, 30)
	if err != nil {
		s.t.Fatalf("SyncTerminatingPod: %v", err)
	}
	s.requireNothingRunning(pod.UID, "SyncTerminatingPod returned nil")
	if took > s.Tolerance {
		s.t.Fatalf("SyncTerminatingPod took %v for containers that exit on SIGTERM (grace 30s, tolerance %v): it must return once they are gone", took, s.Tolerance)
	}
	again, err := s.terminate(context.Background(), pod, 30)
	if err != nil {
		s.t.Fatalf("SyncTerminatingPod again after success: %v", err)
	}
	if again > s.Tolerance {
		s.t.Fatalf("SyncTerminatingPod again after success took %v", again)
	}
	s.requireNothingRunning(pod.UID, "a second SyncTerminatingPod")
}

func (s *conformance[T]) terminatingGrace() {
	const grace = 2
	pod := s.pod(v1.RestartPolicyAlways, nil, s.stubborn("stubborn"), s.long("polite"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "stubborn", "polite")
	took, err := s.terminate(context.Background(), pod, grace)
	if err != nil {
		s.t.Fatalf("SyncTerminatingPod: %v", err)
	}
	s.requireNothingRunning(pod.UID, "SyncTerminatingPod returned nil")
	if low := grace*time.Second - 100*time.Millisecond; took < low {
		s.t.Fatalf("SyncTerminatingPod returned after %v: a container that ignores SIGTERM was killed before its %ds grace period", took, grace)
	}
	if high := grace*time.Second + s.Tolerance; took > high {
		s.t.Fatalf("SyncTerminatingPod took %v with a grace period of %ds (tolerance %v)", took, grace, s.Tolerance)
	}
}

func (s *conformance[T]) cancelled() {
	// SyncPod with a context that has already ended.
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"))
	done, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	_, _ = s.Syncer.SyncPod(done, podworker.SyncPodCreate, pod, nil, s.status(context.Background(), pod.UID))
	if d := time.Since(start); d > s.Tolerance {
		s.t.Fatalf("SyncPod with a cancelled context took %v", d)
	}

	// SyncTerminatingPod with a long grace period, cancelled midway.
	pod = s.pod(v1.RestartPolicyAlways, nil, s.stubborn("stubborn"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "stubborn")
	ctx, cancel := context.WithCancel(context.Background())
	const delay = 300 * time.Millisecond
	stop := time.AfterFunc(delay, cancel)
	defer stop.Stop()
	took, err := s.terminate(ctx, pod, 60)
	if took > delay+s.Tolerance {
		s.t.Fatalf("SyncTerminatingPod returned %v after its context was cancelled (grace 60s, tolerance %v)", took-delay, s.Tolerance)
	}
	if err != nil {
		// Allowed: the engine calls it again. The retry must finish the job.
		if _, err := s.terminate(context.Background(), pod, 1); err != nil {
			s.t.Fatalf("SyncTerminatingPod after a cancelled attempt: %v", err)
		}
	}
	s.requireNothingRunning(pod.UID, "SyncTerminatingPod succeeded after a cancelled attempt")

	// SyncTerminatingPod called with a context that has already ended.
	pod = s.pod(v1.RestartPolicyAlways, nil, s.stubborn("stubborn"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "stubborn")
	took, err = s.terminate(done, pod, 60)
	if took > s.Tolerance {
		s.t.Fatalf("SyncTerminatingPod with a cancelled context took %v (grace 60s, tolerance %v)", took, s.Tolerance)
	}
	if err != nil {
		if _, err := s.terminate(context.Background(), pod, 1); err != nil {
			s.t.Fatalf("SyncTerminatingPod after a cancelled attempt: %v", err)
		}
	}
	s.requireNothingRunning(pod.UID, "SyncTerminatingPod succeeded after a cancelled attempt")
}

func (s *conformance[T]) terminatedIdempotent() {
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "a")
	if _, err := s.terminate(context.Background(), pod, 5); err != nil {
		s.t.Fatalf("SyncTerminatingPod: %v", err)
	}
	for i := range 2 {
		ctx := context.Background()
		if err := s.Syncer.SyncTerminatedPod(ctx, pod, s.status(ctx, pod.UID)); err != nil {
			s.t.Fatalf("SyncTerminatedPod, call %d: %v", i+1, err)
		}
		s.requireNothingRunning(pod.UID, "SyncTerminatedPod")
	}
}

func (s *conformance[T]) terminatedEarly() {
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "a")
	ctx := context.Background()
	err := s.Syncer.SyncTerminatedPod(ctx, pod, s.status(ctx, pod.UID))
	if err == nil {
		// It cleaned up by stopping the containers itself: nothing may run.
		s.requireNothingRunning(pod.UID, "SyncTerminatedPod returned nil for a pod that was not terminated")
	} else if got := s.running(pod.UID); len(got) != 1 {
		s.t.Fatalf("SyncTerminatedPod failed (%v) but the container is no longer seen running (%v): it was lost rather than stopped", err, got)
	}
	if _, err := s.terminate(ctx, pod, 5); err != nil {
		s.t.Fatalf("SyncTerminatingPod after an early SyncTerminatedPod: %v", err)
	}
	s.requireNothingRunning(pod.UID, "SyncTerminatingPod")
	if err := s.Syncer.SyncTerminatedPod(ctx, pod, s.status(ctx, pod.UID)); err != nil {
		s.t.Fatalf("SyncTerminatedPod after termination: %v", err)
	}
}

func (s *conformance[T]) restartedUID() {
	pod := s.pod(v1.RestartPolicyAlways, []namedContainer{s.succeeds("init")}, s.long("a"))
	s.syncPod(podworker.SyncPodCreate, pod)
	var first map[string]string
	if !s.poll(s.StartTimeout, func() bool {
		s.syncPod(podworker.SyncPodSync, pod)
		first = s.running(pod.UID)
		return first["a"] != ""
	}) {
		s.t.Fatalf("container a of a pod with an init container did not start; running: %v", first)
	}
	ctx := context.Background()
	if _, err := s.terminate(ctx, pod, 5); err != nil {
		s.t.Fatalf("SyncTerminatingPod: %v", err)
	}
	if err := s.Syncer.SyncTerminatedPod(ctx, pod, s.status(ctx, pod.UID)); err != nil {
		s.t.Fatalf("SyncTerminatedPod: %v", err)
	}
	s.requireNothingRunning(pod.UID, "the first life of the UID ended")

	// The same UID again, as after a restart request.
	var second map[string]string
	if s.syncPod(podworker.SyncPodCreate, pod) {
		s.t.Fatal("the restarted UID was reported terminal at once")
	}
	if !s.poll(s.StartTimeout, func() bool {
		if s.syncPod(podworker.SyncPodSync, pod) {
			s.t.Fatal("the restarted UID was reported terminal")
		}
		second = s.running(pod.UID)
		return second["a"] != ""
	}) {
		s.t.Fatalf("the restarted UID did not run its container again; running: %v", second)
	}
	if second["a"] == first["a"] {
		s.t.Fatalf("the restarted UID runs the same instance %q as its first life", first["a"])
	}
}

func (s *conformance[T]) runtimePod() {
	rs, ok := s.Syncer.(podworker.RuntimePodSyncer)
	if !ok {
		s.t.Skip("the syncer does not implement podworker.RuntimePodSyncer")
	}
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"), s.stubborn("stubborn"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "a", "stubborn")
	rp := podworker.RuntimePod{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}
	for i := range 2 {
		start := time.Now()
		if err := rs.SyncTerminatingRuntimePod(context.Background(), rp); err != nil {
			s.t.Fatalf("SyncTerminatingRuntimePod, call %d: %v", i+1, err)
		}
		if took := time.Since(start); took > time.Second+s.Tolerance {
			s.t.Fatalf("SyncTerminatingRuntimePod took %v; its grace period is 1s (tolerance %v)", took, s.Tolerance)
		}
		s.requireNothingRunning(pod.UID, "SyncTerminatingRuntimePod")
	}
}
