package processruntime

import (
	"context"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// PodStatus returns a snapshot of the pod. The runtime's view is always
// current, so newerThan is met at once and PodStatus never blocks. A
// tombstone yields the pod's final status (Stopped, each container's last
// exit). A pod the runtime has no state for yields the zero status with
// UID and Time set, and no error.
func (r *Runtime) PodStatus(_ context.Context, uid types.UID, _ time.Time) (PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pods[uid]; p != nil {
		return r.snapshotLocked(p), nil
	}
	return PodStatus{UID: uid, Time: r.clock.Now(), HostIPs: append([]string(nil), r.hostIPs...)}, nil
}

// NothingRunning reports whether status shows no running container.
func (r *Runtime) NothingRunning(status PodStatus) bool { return !status.Running() }

// snapshotLocked builds the pod's PodStatus.
func (r *Runtime) snapshotLocked(p *podState) PodStatus {
	s := PodStatus{UID: p.uid, Namespace: p.namespace, Name: p.name, StartedAt: p.startedAt, Stopped: p.stopped, Time: r.clock.Now(), finalize: p.finalize, DeadlineExceeded: p.deadlineExceeded}
	f := r.podFeatures()
	s.HostIPs = append([]string(nil), r.hostIPs...)
	if p.sb != nil {
		s.PodIPs = append([]string(nil), p.sb.rec.IPs...)
	}
	if len(s.PodIPs) == 0 && r.inHostNetwork(p.spec) {
		s.PodIPs = append([]string(nil), r.hostIPs...)
	}
	now := s.Time
	add := func(c *container) ContainerStatus {
		cs := ContainerStatus{Name: c.rec.Name, Image: c.image, RestartCount: int32(c.rec.Restarts), Exit: copyExit(c.rec.Exit), LastExit: copyExit(c.rec.LastExit)}
		if c.waiting != nil && c.proc == nil {
			cs.WaitReason, cs.WaitMessage = c.waiting.Reason, c.waiting.Message
		}
		switch {
		case c.proc != nil:
			cs.State, cs.PID, cs.StartedAt, cs.ID = ContainerStateRunning, c.proc.pid, c.proc.startedAt, c.proc.id
			if !c.rec.Ephemeral {
				r.probedLocked(f, p, &cs)
			}
		case c.rec.Exit != nil:
			cs.State, cs.ID = ContainerStateExited, c.rec.Exit.ID
			if w := r.restartWaitLocked(c, now); w > 0 {
				cs.BackOffUntil = now.Add(w)
			}
			if c.rec.BackOff > 0 && !r.backOffExpired(c) {
				cs.BackOff = c.rec.BackOff
			}
		default:
			cs.State = ContainerStateWaiting
		}
		return cs
	}
	if p.spec != nil {
		for _, spec := range p.spec.Spec.InitContainers {
			if c := p.containers[spec.Name]; c != nil {
				s.InitContainers = append(s.InitContainers, add(c))
			}
		}
		for _, spec := range p.spec.Spec.Containers {
			if c := p.containers[spec.Name]; c != nil {
				s.Containers = append(s.Containers, add(c))
			}
		}
		for _, spec := range p.spec.Spec.EphemeralContainers {
			if c := p.containers[spec.Name]; c != nil && c.rec.Ephemeral {
				s.EphemeralContainers = append(s.EphemeralContainers, add(c))
			}
		}
		return s
	}
	names := make([]string, 0, len(p.containers))
	for n := range p.containers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := p.containers[n]
		switch {
		case c.rec.Init:
			s.InitContainers = append(s.InitContainers, add(c))
		case c.rec.Ephemeral:
			s.EphemeralContainers = append(s.EphemeralContainers, add(c))
		default:
			s.Containers = append(s.Containers, add(c))
		}
	}
	return s
}

func copyExit(e *ExitStatus) *ExitStatus {
	if e == nil {
		return nil
	}
	c := *e
	return &c
}
