package hollowruntime

import (
	"context"
	"fmt"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// SyncTerminatingPod stops every running container of the pod: one whose
// program exits on SIGTERM at once (code 143), one that ignores it at the
// end of gracePeriod seconds on the runtime's clock (code 137), or at once
// when ctx ends (the call then returns ctx's error; the retry finds
// nothing running). It returns nil once nothing runs; later calls are
// no-ops. A pod the runtime never synced is recorded as stopped.
// podStatusFn is not used: the status writer applies it.
func (r *Runtime) SyncTerminatingPod(ctx context.Context, spec *v1.Pod, _ processruntime.PodStatus, gracePeriod int64, _ func(*v1.PodStatus)) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	p := r.pods[spec.UID]
	if p == nil || p.cleaned {
		if p != nil {
			r.releaseIPLocked(p)
		}
		p = &pod{uid: spec.UID, namespace: spec.Namespace, name: spec.Name, spec: spec, containers: map[string]*container{}}
		r.pods[spec.UID] = p
	}
	r.mu.Unlock()
	return r.stop(ctx, p, time.Duration(gracePeriod)*time.Second)
}

// SyncTerminatingRuntimePod stops the pod's running containers with a
// grace period of 1 second, as SyncTerminatingPod does; a pod the runtime
// does not hold has nothing running.
func (r *Runtime) SyncTerminatingRuntimePod(ctx context.Context, rp podworker.RuntimePod) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	p := r.pods[rp.UID]
	r.mu.Unlock()
	if p == nil {
		return nil
	}
	return r.stop(ctx, p, time.Second)
}

// stop stops p's running containers within grace and marks p stopped.
func (r *Runtime) stop(ctx context.Context, p *pod, grace time.Duration) error {
	r.mu.Lock()
	p.terminating = true
	if p.stopped {
		r.mu.Unlock()
		return nil
	}
	var evs []processruntime.Event
	var stubborn []*container
	now := r.clock.Now()
	for _, c := range p.containers {
		if c.state != processruntime.ContainerStateRunning {
			continue
		}
		evs = append(evs, r.eventLocked(processruntime.ContainerKilling, p, c))
		if c.program.IgnoresTerm {
			c.stopTimer()
			stubborn = append(stubborn, c)
			continue
		}
		r.exitLocked(c, 128+int32(syscall.SIGTERM), int32(syscall.SIGTERM), now)
		evs = append(evs, r.eventLocked(processruntime.ContainerExited, p, c))
	}
	r.mu.Unlock()
	r.emit(evs...)

	var err error
	if len(stubborn) > 0 {
		t := r.clock.NewTimer(grace)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			err = ctx.Err()
		}
	}
	r.mu.Lock()
	evs = evs[:0]
	now = r.clock.Now()
	for _, c := range stubborn {
		if c.state == processruntime.ContainerStateRunning {
			r.exitLocked(c, 128+int32(syscall.SIGKILL), int32(syscall.SIGKILL), now)
			evs = append(evs, r.eventLocked(processruntime.ContainerExited, p, c))
		}
	}
	if err == nil {
		p.stopped = true
		evs = append(evs, r.eventLocked(processruntime.PodStopped, p, nil))
	}
	r.mu.Unlock()
	r.emit(evs...)
	return err
}

// SyncTerminatedPod releases the pod's address and keeps its final state
// as a tombstone (PodStatus still answers), until the UID is synced again.
// It fails, leaving the containers to SyncTerminatingPod, while one runs.
// It is idempotent; a pod the runtime does not hold has nothing to
// release.
func (r *Runtime) SyncTerminatedPod(_ context.Context, spec *v1.Pod, _ processruntime.PodStatus) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[spec.UID]
	if p == nil {
		return nil
	}
	for _, c := range p.containers {
		if c.state == processruntime.ContainerStateRunning {
			return fmt.Errorf("hollowruntime: pod %s: container %q still runs; SyncTerminatingPod must stop it first", podName(spec), c.name)
		}
	}
	p.cleaned = true
	r.releaseIPLocked(p)
	return nil
}
