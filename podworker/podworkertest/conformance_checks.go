package podworkertest

import (
	"context"
	"errors"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/podworker"
)

// The checks of RunConformance, one method each, in the order of its list.

// settleWindow is how long a check keeps syncing a pod to see that nothing
// more starts than what it expects.
const settleWindow = 500 * time.Millisecond

// hugeGraceWatch is how long SyncTerminatingPod with MaxGracePeriodSeconds
// is watched for not killing a container that ignores SIGTERM.
const hugeGraceWatch = time.Second

func (s *conformance[T]) syncPodIdempotent() {
	s.t.Helper()
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"), s.long("b"))
	if s.syncPod(podworker.SyncPodCreate, pod) {
		s.t.Fatal("SyncPod reported a pod of long-running containers terminal")
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
	s.t.Helper()
	pod := s.pod(v1.RestartPolicyNever, []namedContainer{s.succeeds("init")}, s.succeeds("a"), s.succeeds("b"))
	ok := s.poll(s.StartTimeout, func() bool {
		s.t.Helper()
		return s.syncPod(podworker.SyncPodSync, pod)
	})
	if !ok {
		s.t.Fatalf("SyncPod never reported terminal, within %v, a pod whose containers all exited under restartPolicy Never", s.StartTimeout)
	}
	s.requireNothingRunning(pod.UID, "SyncPod reported the pod terminal")
	if _, err := s.terminate(context.Background(), pod, 30, s.Tolerance, "nothing runs: Tolerance"); err != nil {
		s.t.Fatalf("SyncTerminatingPod of a finished pod: %v", err)
	}
}

// initContainersInOrder: while an init container runs, neither the next
// one nor any app container starts.
func (s *conformance[T]) initContainersInOrder() {
	s.t.Helper()
	// The first init container never exits: it must run alone.
	pod := s.pod(v1.RestartPolicyAlways, []namedContainer{s.long("init-1"), s.long("init-2")}, s.long("app"))
	s.syncPod(podworker.SyncPodCreate, pod)
	first := s.waitRunningSyncing(pod.UID, pod, "init-1")
	s.stays(pod, first, "the first init container runs (the second init container and the app container must wait for it to exit)")

	// The first exits at once: the second runs, alone.
	pod = s.pod(v1.RestartPolicyAlways, []namedContainer{s.succeeds("init-1"), s.long("init-2")}, s.long("app"))
	s.syncPod(podworker.SyncPodCreate, pod)
	second := s.waitRunningSyncing(pod.UID, pod, "init-2")
	s.stays(pod, second, "the second init container runs (the app container must wait for it to exit)")
}

// stays keeps syncing pod for settleWindow and requires exactly the
// instances in want to run throughout.
func (s *conformance[T]) stays(pod *v1.Pod, want map[string]string, while string) {
	s.t.Helper()
	window := time.NewTimer(settleWindow)
	defer window.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.syncPod(podworker.SyncPodSync, pod)
		if got := s.running(pod.UID); !maps.Equal(got, want) {
			s.t.Fatalf("while %s, the running containers changed from %v to %v", while, want, got)
		}
		select {
		case <-window.C:
			return
		case <-tick.C:
		}
	}
}

func (s *conformance[T]) terminatingStops() {
	s.t.Helper()
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"), s.long("b"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "a", "b")
	const why = "its containers exit on SIGTERM (grace 30s): Tolerance"
	if _, err := s.terminate(context.Background(), pod, 30, s.Tolerance, why); err != nil {
		s.t.Fatalf("SyncTerminatingPod: %v", err)
	}
	s.requireNothingRunning(pod.UID, "SyncTerminatingPod returned nil")
	if _, err := s.terminate(context.Background(), pod, 30, s.Tolerance, "called again after success, nothing runs: Tolerance"); err != nil {
		s.t.Fatalf("SyncTerminatingPod again after success: %v", err)
	}
	s.requireNothingRunning(pod.UID, "a second SyncTerminatingPod")
}

func (s *conformance[T]) terminatingGrace() {
	s.t.Helper()
	const grace = 2
	pod := s.pod(v1.RestartPolicyAlways, nil, s.stubborn("stubborn"), s.long("polite"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "stubborn", "polite")
	took, err := s.terminate(context.Background(), pod, grace, grace*time.Second+s.Tolerance, "grace period 2s plus Tolerance")
	if err != nil {
		s.t.Fatalf("SyncTerminatingPod: %v", err)
	}
	s.requireNothingRunning(pod.UID, "SyncTerminatingPod returned nil")
	if low := grace*time.Second - 100*time.Millisecond; took < low {
		s.t.Fatalf("SyncTerminatingPod returned after %v: a container that ignores SIGTERM was killed before its %ds grace period", took, grace)
	}
}

// terminatingHugeGrace: the longest grace period the engine hands out is a
// long wait, not an overflow.
func (s *conformance[T]) terminatingHugeGrace() {
	s.t.Helper()
	pod := s.pod(v1.RestartPolicyAlways, nil, s.stubborn("stubborn"))
	s.syncPod(podworker.SyncPodCreate, pod)
	before := s.waitRunning(pod.UID, "stubborn")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := s.startTerminate(ctx, pod, podworker.MaxGracePeriodSeconds)
	watch := time.NewTimer(hugeGraceWatch)
	defer watch.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for watching := true; watching; {
		select {
		case <-c.done:
			s.t.Fatalf("SyncTerminatingPod with a grace period of MaxGracePeriodSeconds (%ds) returned after %v (error %v) while a container that ignores SIGTERM should still run: the grace period was not honoured (an overflowing time.Duration?)", podworker.MaxGracePeriodSeconds, c.took, c.err)
		case <-watch.C:
			watching = false
		case <-tick.C:
		}
		if got := s.running(pod.UID); !maps.Equal(got, before) {
			s.t.Fatalf("SyncTerminatingPod with a grace period of MaxGracePeriodSeconds (%ds) stopped a container that ignores SIGTERM within %v: running before %v, now %v", podworker.MaxGracePeriodSeconds, hugeGraceWatch, before, got)
		}
	}
	cancel()
	s.await(c, s.Tolerance, "its context was cancelled: Tolerance")
	if c.err == nil {
		s.requireNothingRunning(pod.UID, "SyncTerminatingPod returned nil")
	}
}

func (s *conformance[T]) cancelled() {
	s.t.Helper()
	const cancelledWhy = "its context was cancelled: Tolerance"
	// SyncPod with a context that has already ended.
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"))
	done, cancel := context.WithCancel(context.Background())
	cancel()
	st := s.status(pod.UID)
	s.call("SyncPod with a cancelled context", pod.UID, s.Tolerance, cancelledWhy, func() (bool, error) {
		return s.Syncer.SyncPod(done, podworker.SyncPodCreate, pod, nil, st)
	})

	// SyncTerminatingPod with a long grace period, cancelled midway.
	pod = s.pod(v1.RestartPolicyAlways, nil, s.stubborn("stubborn"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "stubborn")
	ctx, cancel := context.WithCancel(context.Background())
	const delay = 300 * time.Millisecond
	stop := time.AfterFunc(delay, cancel)
	defer stop.Stop()
	_, err := s.terminate(ctx, pod, 60, delay+s.Tolerance, "grace 60s, its context is cancelled after 300ms: 300ms plus Tolerance")
	if err != nil {
		// Allowed: the engine calls it again. The retry must finish the job.
		if _, err := s.terminate(context.Background(), pod, 1, time.Second+s.Tolerance, "grace 1s plus Tolerance"); err != nil {
			s.t.Fatalf("SyncTerminatingPod after a cancelled attempt: %v", err)
		}
	}
	s.requireNothingRunning(pod.UID, "SyncTerminatingPod succeeded after a cancelled attempt")

	// SyncTerminatingPod called with a context that has already ended.
	pod = s.pod(v1.RestartPolicyAlways, nil, s.stubborn("stubborn"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "stubborn")
	_, err = s.terminate(done, pod, 60, s.Tolerance, "grace 60s, its context was cancelled before the call: Tolerance")
	if err != nil {
		if _, err := s.terminate(context.Background(), pod, 1, time.Second+s.Tolerance, "grace 1s plus Tolerance"); err != nil {
			s.t.Fatalf("SyncTerminatingPod after a cancelled attempt: %v", err)
		}
	}
	s.requireNothingRunning(pod.UID, "SyncTerminatingPod succeeded after a cancelled attempt")
}

func (s *conformance[T]) terminatedIdempotent() {
	s.t.Helper()
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "a")
	if _, err := s.terminate(context.Background(), pod, 5, s.Tolerance, "its container exits on SIGTERM: Tolerance"); err != nil {
		s.t.Fatalf("SyncTerminatingPod: %v", err)
	}
	for i := range 2 {
		if err := s.terminated(pod); err != nil {
			s.t.Fatalf("SyncTerminatedPod, call %d: %v", i+1, err)
		}
		s.requireNothingRunning(pod.UID, "SyncTerminatedPod")
	}
}

func (s *conformance[T]) terminatedEarly() {
	s.t.Helper()
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "a")
	err := s.terminated(pod)
	if err == nil {
		// It cleaned up by stopping the containers itself: nothing may run.
		s.requireNothingRunning(pod.UID, "SyncTerminatedPod returned nil for a pod that was not terminated")
	} else if got := s.running(pod.UID); len(got) != 1 {
		s.t.Fatalf("SyncTerminatedPod failed (%v) but the container is no longer seen running (%v): it was lost rather than stopped", err, got)
	}
	if _, err := s.terminate(context.Background(), pod, 5, s.Tolerance, "its container exits on SIGTERM: Tolerance"); err != nil {
		s.t.Fatalf("SyncTerminatingPod after an early SyncTerminatedPod: %v", err)
	}
	s.requireNothingRunning(pod.UID, "SyncTerminatingPod")
	if err := s.terminated(pod); err != nil {
		s.t.Fatalf("SyncTerminatedPod after termination: %v", err)
	}
}

func (s *conformance[T]) restartedUID() {
	s.t.Helper()
	pod := s.pod(v1.RestartPolicyAlways, []namedContainer{s.succeeds("init")}, s.long("a"))
	s.syncPod(podworker.SyncPodCreate, pod)
	first := s.waitRunningSyncing(pod.UID, pod, "a")
	if _, err := s.terminate(context.Background(), pod, 5, s.Tolerance, "its container exits on SIGTERM: Tolerance"); err != nil {
		s.t.Fatalf("SyncTerminatingPod: %v", err)
	}
	if err := s.terminated(pod); err != nil {
		s.t.Fatalf("SyncTerminatedPod: %v", err)
	}
	s.requireNothingRunning(pod.UID, "the first life of the UID ended")

	// The same UID again, as after a restart request.
	if s.syncPod(podworker.SyncPodCreate, pod) {
		s.t.Fatal("the restarted UID was reported terminal at once")
	}
	var second map[string]string
	if !s.poll(s.StartTimeout, func() bool {
		s.t.Helper()
		if s.syncPod(podworker.SyncPodSync, pod) {
			s.t.Fatal("the restarted UID was reported terminal")
		}
		second = s.running(pod.UID)
		return second["a"] != ""
	}) {
		s.t.Fatalf("the restarted UID did not run its container again within %v; running: %v", s.StartTimeout, second)
	}
	if second["a"] == first["a"] {
		s.t.Fatalf("the restarted UID runs the same instance %q as its first life", first["a"])
	}
}

func (s *conformance[T]) runtimePod() {
	s.t.Helper()
	if _, ok := s.Syncer.(podworker.RuntimePodSyncer); !ok {
		s.t.Skip("the syncer does not implement podworker.RuntimePodSyncer")
	}
	pod := s.pod(v1.RestartPolicyAlways, nil, s.long("a"), s.stubborn("stubborn"))
	s.syncPod(podworker.SyncPodCreate, pod)
	s.waitRunning(pod.UID, "a", "stubborn")
	rp := podworker.RuntimePod{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}
	for i := range 2 {
		c := s.call("SyncTerminatingRuntimePod", pod.UID, time.Second+s.Tolerance, "its grace period is 1s: 1s plus Tolerance", func() (bool, error) {
			return false, podworker.SyncTerminatingRuntimePod(context.Background(), s.Syncer, rp)
		})
		if i == 0 && errors.Is(c.err, podworker.ErrNotImplemented) {
			s.t.Skipf("the syncer's SyncTerminatingRuntimePod is not implemented: %v", c.err)
		}
		if c.err != nil {
			s.t.Fatalf("SyncTerminatingRuntimePod, call %d: %v", i+1, c.err)
		}
		s.requireNothingRunning(pod.UID, "SyncTerminatingRuntimePod")
	}
}
