package podworkertest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// The suite's plumbing: building pods, calling hooks within a time bound,
// reading the probe, and cleaning up. Every function that reports a failure
// marks itself a helper, so the failure is reported at the line that called
// RunConformance.

// hookCall is one call into the target made in its own goroutine, so that a
// call that overruns its time fails the check at once instead of hanging it.
type hookCall struct {
	what     string
	uid      types.UID
	done     chan struct{}
	terminal bool
	err      error
	took     time.Duration
}

// start runs f in a new goroutine and returns the call.
func (s *conformance[T]) start(what string, uid types.UID, f func() (bool, error)) *hookCall {
	c := &hookCall{what: what, uid: uid, done: make(chan struct{})}
	begin := time.Now()
	go func() {
		defer close(c.done)
		c.terminal, c.err = f()
		c.took = time.Since(begin)
	}()
	return c
}

// await waits up to limit for c to return. When it does not, the check
// fails now with c's description and why the limit applies; c is left to
// the pod's cleanup.
func (s *conformance[T]) await(c *hookCall, limit time.Duration, why string) {
	s.t.Helper()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		s.mu.Lock()
		if s.abandoned == nil {
			s.abandoned = map[types.UID][]*hookCall{}
		}
		s.abandoned[c.uid] = append(s.abandoned[c.uid], c)
		s.mu.Unlock()
		s.t.Fatalf("%s did not return within %v (%s)", c.what, limit, why)
	}
}

// call runs f and waits up to limit for it (see await).
func (s *conformance[T]) call(what string, uid types.UID, limit time.Duration, why string, f func() (bool, error)) *hookCall {
	s.t.Helper()
	c := s.start(what, uid, f)
	s.await(c, limit, why)
	return c
}

const noWait = "it has nothing to wait for: StartTimeout"

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
	s.t.Cleanup(func() {
		s.t.Helper() // so that the cleanup's failures, too, are the caller's
		s.cleanup(pod)
	})
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

// cleanup stops and removes a pod whatever state the check left it in. It
// first gives the pod's abandoned calls 3×StartTimeout to return, so that
// its own calls do not overlap them, and bounds each of its calls the same.
func (s *conformance[T]) cleanup(pod *v1.Pod) {
	s.t.Helper()
	limit := 3 * s.StartTimeout
	s.mu.Lock()
	abandoned := s.abandoned[pod.UID]
	s.mu.Unlock()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for _, c := range abandoned {
		select {
		case <-c.done:
		case <-deadline.C:
			s.t.Errorf("cleanup: %s still runs %v after it overran; stopping the pod beside it", c.what, limit)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	bounded := func(what string, f func() error) error {
		c := s.start(what, pod.UID, func() (bool, error) { return false, f() })
		select {
		case <-c.done:
			return c.err
		case <-time.After(limit):
			return fmt.Errorf("%s did not return within %v", what, limit)
		}
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = bounded("SyncTerminatingPod", func() error {
			return s.Syncer.SyncTerminatingPod(ctx, pod, s.statusOrZero(ctx, pod.UID), 1, nil)
		}); err == nil {
			break
		}
	}
	if err != nil {
		s.t.Errorf("cleanup: SyncTerminatingPod of %s keeps failing: %v", pod.Name, err)
		return
	}
	if err := bounded("SyncTerminatedPod", func() error {
		return s.Syncer.SyncTerminatedPod(ctx, pod, s.statusOrZero(ctx, pod.UID))
	}); err != nil {
		s.t.Errorf("cleanup: SyncTerminatedPod of %s: %v", pod.Name, err)
	}
}

// statusOrZero reads the pod's status, or the zero T when that fails (the
// cleanup goes on regardless).
func (s *conformance[T]) statusOrZero(ctx context.Context, uid types.UID) T {
	var zero T
	if s.Status == nil {
		return zero
	}
	st, err := s.Status.PodStatus(ctx, uid, time.Time{})
	if err != nil {
		return zero
	}
	return st
}

// status reads the pod's status as the engine would before a hook, with a
// live context: a check that hands a hook a cancelled one is testing the
// hook, not the StatusSource.
func (s *conformance[T]) status(uid types.UID) T {
	s.t.Helper()
	var st T
	if s.Status == nil {
		return st
	}
	c := s.call(fmt.Sprintf("StatusSource.PodStatus(%s)", uid), uid, s.StartTimeout, noWait, func() (bool, error) {
		var err error
		st, err = s.Status.PodStatus(context.Background(), uid, time.Time{})
		return false, err
	})
	if c.err != nil {
		s.t.Fatalf("StatusSource.PodStatus(%s): %v", uid, c.err)
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
	return s.waitRunningSyncing(uid, nil, names...)
}

// waitRunningSyncing is waitRunning that also calls SyncPod before each
// look when pod is not nil, as the engine's resyncs would, for runtimes that
// move a pod on one step per sync.
func (s *conformance[T]) waitRunningSyncing(uid types.UID, pod *v1.Pod, names ...string) map[string]string {
	s.t.Helper()
	want := slices.Sorted(slices.Values(names))
	var got map[string]string
	ok := s.poll(s.StartTimeout, func() bool {
		s.t.Helper()
		if pod != nil {
			s.syncPod(podworker.SyncPodSync, pod)
		}
		got = s.running(uid)
		return slices.Equal(slices.Sorted(maps.Keys(got)), want)
	})
	if !ok {
		s.t.Fatalf("containers %v were not seen running (alone) within %v; running: %v", want, s.StartTimeout, got)
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
	s.t.Helper()
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

// syncPod calls SyncPod with a fresh status, within StartTimeout, and
// requires it to succeed.
func (s *conformance[T]) syncPod(ut podworker.UpdateType, pod *v1.Pod) bool {
	s.t.Helper()
	st := s.status(pod.UID)
	c := s.call(fmt.Sprintf("SyncPod(%s) of %s", ut, pod.Name), pod.UID, s.StartTimeout, "it must start containers, not wait for them: StartTimeout", func() (bool, error) {
		return s.Syncer.SyncPod(context.Background(), ut, pod, nil, st)
	})
	if c.err != nil {
		s.t.Fatalf("SyncPod(%s) of %s: %v", ut, pod.Name, c.err)
	}
	return c.terminal
}

// startTerminate starts SyncTerminatingPod in its own goroutine.
func (s *conformance[T]) startTerminate(ctx context.Context, pod *v1.Pod, grace int64) *hookCall {
	s.t.Helper()
	st := s.status(pod.UID)
	return s.start(fmt.Sprintf("SyncTerminatingPod(grace %ds) of %s", grace, pod.Name), pod.UID, func() (bool, error) {
		return false, s.Syncer.SyncTerminatingPod(ctx, pod, st, grace, nil)
	})
}

// terminate calls SyncTerminatingPod, waits up to limit for it, and returns
// how long it took.
func (s *conformance[T]) terminate(ctx context.Context, pod *v1.Pod, grace int64, limit time.Duration, why string) (time.Duration, error) {
	s.t.Helper()
	c := s.startTerminate(ctx, pod, grace)
	s.await(c, limit, why)
	return c.took, c.err
}

// terminated calls SyncTerminatedPod within StartTimeout.
func (s *conformance[T]) terminated(pod *v1.Pod) error {
	s.t.Helper()
	st := s.status(pod.UID)
	c := s.call(fmt.Sprintf("SyncTerminatedPod of %s", pod.Name), pod.UID, s.StartTimeout, noWait, func() (bool, error) {
		return false, s.Syncer.SyncTerminatedPod(context.Background(), pod, st)
	})
	return c.err
}
