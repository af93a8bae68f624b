package nodemetrics

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// RunningFunc says whether pod runs now, as the runtime sees it after a
// sync (for the kubelet: its phase is Running). It is called on the hook's
// goroutine.
type RunningFunc func(ctx context.Context, pod *v1.Pod) bool

// WrapSyncer returns s with its hooks measured into m:
// kubelet_pod_worker_duration_seconds for every hook, and
// kubelet_pod_start_duration_seconds once per pod, after the first
// successful SyncPod for which running says the pod runs (until then
// running is asked after each SyncPod; after, never again for that UID).
// A pod without a kubernetes.io/config.seen annotation has no start
// duration.
//
// The result is a podworker.Decorate of s: runtime pods are stopped (and
// timed as "kill") by s's SyncTerminatingRuntimePod when s has one; when
// it has none, their kills fail with podworker.ErrNotImplemented, as they
// would without the wrapper, and are not timed.
func WrapSyncer[T any](s podworker.PodSyncer[T], m *Metrics, running RunningFunc) podworker.PodSyncer[T] {
	w := &startTracker{started: map[types.UID]bool{}}
	timed := func(op string, start time.Time) {
		m.workerDuration.WithLabelValues(op).Observe(m.clock.Since(start).Seconds())
	}
	return podworker.Decorate(s, podworker.PodSyncerFuncs[T]{
		SyncPodFunc: func(ctx context.Context, updateType podworker.UpdateType, pod, mirrorPod *v1.Pod, st T) (bool, error) {
			start := m.clock.Now()
			terminal, err := s.SyncPod(ctx, updateType, pod, mirrorPod, st)
			timed(updateType.String(), start)
			if err == nil && !terminal && w.pending(pod.UID) && running(ctx, pod) {
				if seen, ok := firstSeen(pod); ok && w.start(pod.UID) {
					m.podStart.Observe(m.clock.Since(seen).Seconds())
				}
			}
			return terminal, err
		},
		SyncTerminatingPodFunc: func(ctx context.Context, pod *v1.Pod, st T, gracePeriod int64, fn func(*v1.PodStatus)) error {
			defer timed("kill", m.clock.Now())
			return s.SyncTerminatingPod(ctx, pod, st, gracePeriod, fn)
		},
		SyncTerminatedPodFunc: func(ctx context.Context, pod *v1.Pod, st T) error {
			defer timed("terminated", m.clock.Now())
			err := s.SyncTerminatedPod(ctx, pod, st)
			if err == nil {
				w.forget(pod.UID)
			}
			return err
		},
		SyncTerminatingRuntimePodFunc: func(ctx context.Context, pod podworker.RuntimePod) error {
			start := m.clock.Now()
			err := podworker.SyncTerminatingRuntimePod(ctx, s, pod)
			if !errors.Is(err, podworker.ErrNotImplemented) {
				timed("kill", start) // a hook s has not is not a kill
			}
			return err
		},
	})
}

// firstSeen reads the time config first saw pod.
func firstSeen(pod *v1.Pod) (time.Time, bool) {
	v, ok := pod.Annotations[mirror.ConfigFirstSeenAnnotationKey]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// startTracker remembers which pods' start was observed, until their
// cleanup: one entry per pod the workers hold.
type startTracker struct {
	mu      sync.Mutex
	started map[types.UID]bool
}

func (t *startTracker) pending(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.started[uid]
}

// start marks uid started and says whether it was not yet.
func (t *startTracker) start(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started[uid] {
		return false
	}
	t.started[uid] = true
	return true
}

func (t *startTracker) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.started, uid)
}
