package cri

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle/containerhook"
)

// postStart runs c's postStart hook, if it has one, on instance id (CRI
// attempt attempt), which just started. A failed hook kills the instance
// as the kubelet does (a Killing event "FailedPostStartHook", its preStop
// hook within the pod's grace period), leaves the container waiting with
// the hook error's reason and message until its next attempt, and is an
// error: the container's restart policy and back-off restart it. ctx
// ending first (the pod is terminating) is an error too, and kills
// nothing: the termination stops the container.
func (s *Syncer) postStart(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, attempt uint32, podIPs []string) error {
	prim := s.features()
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return nil
	}
	err := prim.hooks.PostStart(ctx, s.hookContainer(pod, c.Name, id, podIPs))
	if err == nil {
		return nil
	}
	var hookErr *containerhook.HookError
	if !errors.Is(err, containerhook.ErrPostStartHook) || !errors.As(err, &hookErr) {
		return fmt.Errorf("cri: the postStart hook of container %q (%s) of pod %s did not complete: %w", c.Name, id, podRef(pod), err)
	}
	s.containerEvent(pod, c.Name, v1.EventTypeNormal, EventKilling, containerhook.ReasonFailedPostStartHook)
	s.waiting.set(pod.UID, c.Name, Waiting{Reason: hookErr.Reason, Message: hookErr.Message, Attempt: attempt + 1})
	kerr := s.stopContainer(ctx, pod, c, id, podIPs, gracePeriodOf(pod))
	if kerr != nil {
		kerr = fmt.Errorf("cri: killing container %q (%s) of pod %s: %w", c.Name, id, podRef(pod), kerr)
	}
	// The hook's message may hold its output: it goes in the status only.
	return errors.Join(fmt.Errorf("cri: the postStart hook of container %q (%s) of pod %s failed (%s); the container was killed",
		c.Name, id, podRef(pod), hookErr.Reason), kerr)
}

// stopContainer stops instance id with grace seconds: when spec (the
// container's spec, nil when unknown) has a preStop hook and grace is
// above 0, the hook runs first, within grace, and the stop gets what is
// left, at least containerhook.MinimumGracePeriodSeconds, as on a kubelet.
// A failed hook is recorded by the hook runner and the stop goes on. An
// instance already gone is not an error; the error of a failed stop says
// the timeout, for the caller to name the container.
func (s *Syncer) stopContainer(ctx context.Context, pod *v1.Pod, spec *v1.Container, id string, podIPs []string, grace int64) error {
	prim := s.features()
	timeout := grace
	if pod != nil && spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && grace > 0 {
		left, err := prim.hooks.PreStop(ctx, s.hookContainer(pod, spec.Name, id, podIPs), grace)
		if err != nil {
			logr.FromContextOrDiscard(ctx).V(2).Info("PreStop hook did not succeed; stopping the container all the same",
				"container", spec.Name, "err", err.Error())
		}
		timeout = max(left, containerhook.MinimumGracePeriodSeconds)
	}
	if err := s.containers.StopContainer(ctx, id, timeout); err != nil && !isNotFound(err) {
		return fmt.Errorf("with timeout %ds: %w", timeout, err)
	}
	return nil
}

// hookContainer names instance id of container name for the hook runner:
// its API ContainerID, and the pod's IP (the node's loopback for a
// host-network pod whose node addresses are unknown) for httpGet hooks.
func (s *Syncer) hookContainer(pod *v1.Pod, name, id string, podIPs []string) containerhook.Container {
	return containerhook.Container{Pod: pod, Name: name, ID: s.containerID(id), Host: hostOf(pod, podIPs)}
}

// containerID is the API ContainerID of CRI container id.
func (s *Syncer) containerID(id string) string {
	return s.opts.RuntimeName + "://" + id
}

// hostOf is where httpGet hooks that name no host connect: the pod's
// primary IP, or the loopback for a host-network pod with none known.
func hostOf(pod *v1.Pod, podIPs []string) string {
	switch {
	case len(podIPs) > 0:
		return podIPs[0]
	case pod.Spec.HostNetwork:
		return "127.0.0.1"
	}
	return ""
}
