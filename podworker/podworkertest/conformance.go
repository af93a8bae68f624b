package podworkertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
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
	// StartTimeout bounds what takes the runtime real work: a container
	// started by SyncPod must be seen running by the Probe within it, a pod
	// whose containers all exit must be reported terminal by SyncPod within
	// it (SyncPod is called again meanwhile, as the engine's resyncs do),
	// and a call with nothing to wait for — SyncPod, SyncTerminatedPod,
	// StatusSource.PodStatus — must return within it. Defaults to 10
	// seconds.
	StartTimeout time.Duration
	// Tolerance is how far a hook may overrun the time the contract gives
	// it. SyncTerminatingPod gets no time beyond the exit of containers
	// that exit on SIGTERM, and their grace period for containers that
	// ignore it; SyncTerminatingRuntimePod gets its grace period of 1
	// second; every hook gets no time at all once its context is
	// cancelled. Defaults to 2 seconds.
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
//   - init containers run one at a time, in order, before any app
//     container: while the first (a long-running one) runs, nothing else
//     starts; once it has exited, the second runs and still no app
//     container starts. Each state is watched for half a second of
//     repeated SyncPod calls;
//   - SyncTerminatingPod leaves nothing running, returns promptly when the
//     containers exit on SIGTERM, and respects the grace period within
//     Tolerance for one that ignores SIGTERM: not killed early, not waited
//     for much longer; calling it again after success is a prompt no-op;
//   - SyncTerminatingPod handed podworker.MaxGracePeriodSeconds (the
//     longest grace period the engine gives) still waits for a container
//     that ignores SIGTERM, rather than killing it at once (as an
//     overflowing time.Duration conversion would); it is watched for one
//     second, then its context is cancelled;
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
// Every hook call is timed against the bound above that applies to it
// (StartTimeout, or the contract's time plus Tolerance). A call that
// overruns it fails the check at that moment; the suite does not wait for
// it to return (a hook that ignores its context would otherwise hang the
// suite for its whole grace period). Before cleaning up a pod, the suite
// waits up to 3×StartTimeout for such a call to return, and gives each of
// its own cleanup calls 3×StartTimeout.
//
// Failures are reported at the line that called RunConformance, under the
// subtest named after the check; the message says what was expected.
// Timing checks use the wall clock, so run the suite with the real clock.
func RunConformance[T any](t *testing.T, factory func(t *testing.T) ConformanceTarget[T]) {
	t.Helper()
	for _, c := range conformanceChecks[T]() {
		t.Run(c.name, func(t *testing.T) {
			t.Helper()
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
		{"InitContainersRunInOrder", (*conformance[T]).initContainersInOrder},
		{"SyncTerminatingPodStopsEverything", (*conformance[T]).terminatingStops},
		{"SyncTerminatingPodRespectsGracePeriod", (*conformance[T]).terminatingGrace},
		{"SyncTerminatingPodWaitsWithTheLongestGracePeriod", (*conformance[T]).terminatingHugeGrace},
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

	mu sync.Mutex
	// abandoned are the hook calls that overran their time, by pod: the
	// check failed without waiting for them, and the pod's cleanup waits
	// for them first.
	abandoned map[types.UID][]*hookCall
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
