package virtualkubelet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/podworker"
)

// statusSource reads a pod's remote state before each hook; nil when the
// backend has no such pod.
type statusSource struct{ p *Provider }

var (
	_ podworker.StatusSource[*RemotePod]   = statusSource{}
	_ podworker.StoppedChecker[*RemotePod] = statusSource{}
	_ podworker.PodSyncer[*RemotePod]      = (*syncer)(nil)
	_ podworker.RuntimePodSyncer           = (*syncer)(nil)
)

// PodStatus implements podworker.StatusSource: the backend's view is always
// current, so newerThan needs no waiting.
func (s statusSource) PodStatus(ctx context.Context, uid types.UID, _ time.Time) (*RemotePod, error) {
	rp, err := s.p.backend.Status(ctx, uid)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return rp, err
}

// NothingRunning implements podworker.StoppedChecker.
func (statusSource) NothingRunning(rp *RemotePod) bool { return !rp.Running() }

// syncer is the provider's podworker.PodSyncer: the three phases of a pod
// on the backend. Each hook runs on an engine worker goroutine, never
// concurrently for one UID.
type syncer struct{ p *Provider }

// SyncPod creates the pod in the backend when it has none, applies image
// changes, and publishes the status. It reports the pod terminal when all
// its containers exited for good (the backend applies the restart policy),
// or when the backend lost a pod it had accepted.
func (s *syncer) SyncPod(ctx context.Context, _ podworker.UpdateType, pod, _ *v1.Pod, rp *RemotePod) (bool, error) {
	p := s.p
	if rp == nil {
		if p.wasCreated(pod.UID) {
			// The backend accepted the pod and no longer has it: nothing of
			// it can run. Terminate it; its final status says
			// ContainerStatusUnknown.
			return true, nil
		}
		if err := p.backend.Create(ctx, pod); err != nil && !errors.Is(err, ErrAlreadyExists) {
			return false, fmt.Errorf("creating pod %s in the backend: %w", podKey(pod), err)
		}
		p.markCreated(pod.UID)
		var err error
		if rp, err = p.backend.Status(ctx, pod.UID); err != nil && !errors.Is(err, ErrNotFound) {
			return false, fmt.Errorf("reading pod %s after creating it: %w", podKey(pod), err)
		}
	} else {
		p.markCreated(pod.UID)
		if p.updater != nil && imagesDiffer(pod, rp) {
			if err := p.updater.Update(ctx, pod); err != nil {
				return false, fmt.Errorf("updating pod %s in the backend: %w", podKey(pod), err)
			}
			var err error
			if rp, err = p.backend.Status(ctx, pod.UID); err != nil && !errors.Is(err, ErrNotFound) {
				return false, fmt.Errorf("reading pod %s after updating it: %w", podKey(pod), err)
			}
		}
	}
	if rp.Exited() {
		// Finished on its own. The terminal status is published once, as
		// final, by SyncTerminatingPod, which the engine runs next.
		return true, nil
	}
	p.publish(pod.UID, podStatus(pod, rp), false)
	return false, nil
}

// SyncTerminatingPod stops the pod's containers with the engine's grace
// period (which only ever shortens), then publishes the final status. It
// fails, and is retried, while the backend cannot confirm they stopped.
func (s *syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, rp *RemotePod, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	p := s.p
	if rp.Running() {
		err := p.backend.Stop(ctx, pod.UID, time.Duration(gracePeriod)*time.Second)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("stopping pod %s in the backend: %w", podKey(pod), err)
		}
		rp, err = p.backend.Status(ctx, pod.UID)
		switch {
		case errors.Is(err, ErrNotFound):
			rp = nil
		case err != nil:
			return fmt.Errorf("reading pod %s after stopping it: %w", podKey(pod), err)
		case rp.Running():
			return fmt.Errorf("pod %s still has running containers after Stop", podKey(pod))
		}
	}
	st := finalStatus(pod, rp, p.lastStatus(pod.UID))
	if podStatusFn != nil {
		podStatusFn(&st)
	}
	p.publish(pod.UID, st, true)
	return nil
}

// SyncTerminatedPod releases the pod's backend resources. The API object
// is not touched: it stays, with its final status, until the API server
// removes it.
func (s *syncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, rp *RemotePod) error {
	if rp == nil {
		return nil
	}
	if err := s.p.backend.Remove(ctx, pod.UID); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("removing pod %s from the backend: %w", podKey(pod), err)
	}
	return nil
}

// SyncTerminatingRuntimePod stops and removes a pod that only the backend
// knows (an orphan), with the grace period podkit gives orphans
// (lifecycle.OrphanGracePeriodSeconds, 1 second, as the kubelet).
func (s *syncer) SyncTerminatingRuntimePod(ctx context.Context, pod podworker.RuntimePod) error {
	b := s.p.backend
	if err := b.Stop(ctx, pod.UID, time.Duration(lifecycle.OrphanGracePeriodSeconds)*time.Second); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("stopping orphaned pod %s/%s (%s): %w", pod.Namespace, pod.Name, pod.UID, err)
	}
	if err := b.Remove(ctx, pod.UID); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("removing orphaned pod %s/%s (%s): %w", pod.Namespace, pod.Name, pod.UID, err)
	}
	return nil
}

// imagesDiffer reports whether a container of pod asks for another image
// than the backend runs.
func imagesDiffer(pod *v1.Pod, rp *RemotePod) bool {
	for _, c := range pod.Spec.Containers {
		i := slices.IndexFunc(rp.Containers, func(r RemoteContainer) bool { return r.Name == c.Name })
		if i >= 0 && rp.Containers[i].Image != c.Image {
			return true
		}
	}
	return false
}

func (p *Provider) wasCreated(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[uid]
	return e != nil && e.created
}

func (p *Provider) markCreated(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[uid]; e != nil {
		e.created = true
	}
}

func (p *Provider) lastStatus(uid types.UID) *v1.PodStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[uid]; e != nil && e.status != nil {
		return e.status.DeepCopy()
	}
	return nil
}

// publish records a newly computed status and queues it for NotifyPods
// when it differs from the last one. A final status is never replaced by
// a non-final one.
func (p *Provider) publish(uid types.UID, st v1.PodStatus, final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[uid]
	if e == nil || (e.final && !final) {
		return
	}
	if e.status != nil && e.final == final && apiequality.Semantic.DeepEqual(*e.status, st) {
		return
	}
	e.status, e.final = &st, final
	e.version++
	e.delivered = false
	p.enqueueLocked(uid)
}
