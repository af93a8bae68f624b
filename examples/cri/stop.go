package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stopAll stops what status shows may run of pod uid (containers with
// grace seconds each, in parallel, then every sandbox), then checks with
// the runtime that nothing runs. pod, when known (nil for a runtime-only
// pod), gives the containers' preStop hooks, which run within the grace
// period. A cancelled ctx escalates.
func (s *Syncer) stopAll(ctx context.Context, pod *v1.Pod, uid types.UID, status *PodStatus, grace int64) error {
	if err := ctx.Err(); err != nil {
		return s.escalate(ctx, uid, status, err)
	}
	err := s.stopOnce(ctx, pod, uid, status, grace)
	if err == nil || ctx.Err() == nil {
		return err
	}
	return s.escalate(ctx, uid, status, err)
}

// escalate is what a cancelled stop does: it kills (zero timeout) what
// still runs of pod uid, on a context detached from ctx and bounded by
// KillTimeout, and returns cause (which wraps ctx's error) with the
// outcome. With ctx not cancelled it returns cause as is.
func (s *Syncer) escalate(ctx context.Context, uid types.UID, status *PodStatus, cause error) error {
	if ctx.Err() == nil {
		return cause
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.KillTimeout)
	defer cancel()
	var err error
	if status == nil || status.UID != uid {
		status, err = s.PodStatus(kctx, uid, time.Time{})
	}
	if err == nil {
		err = s.stopOnce(kctx, nil, uid, status, 0)
	}
	if err != nil {
		return fmt.Errorf("cri: stopping pod %s was cancelled (%w), and killing it failed: %w", uid, ctx.Err(), err)
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Stopping the pod was cancelled; killed it without grace")
	return fmt.Errorf("cri: stopping pod %s was cancelled; its containers were killed without grace: %w", uid, ctx.Err())
}

// stopOnce is one pass of stopAll, without escalation.
func (s *Syncer) stopOnce(ctx context.Context, pod *v1.Pod, uid types.UID, status *PodStatus, grace int64) error {
	errs := make([]error, len(status.containers()))
	var podIPs []string
	if pod != nil {
		podIPs = s.podIPs(pod, status)
	}
	var wg sync.WaitGroup
	for i, c := range status.containers() {
		if !mayRun(c.GetState()) {
			continue
		}
		var spec *v1.Container
		if pod != nil && c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			spec = containerSpec(pod, c.GetMetadata().GetName())
		}
		wg.Go(func() {
			err := s.stopContainer(ctx, pod, spec, c.GetId(), podIPs, grace)
			if err != nil {
				errs[i] = fmt.Errorf("cri: stopping container %q (%s) of pod %s: %w", c.GetMetadata().GetName(), c.GetId(), uid, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, sb := range status.Sandboxes {
		if err := s.sandboxes.StopPodSandbox(ctx, sb.GetId()); err != nil && !isNotFound(err) {
			return fmt.Errorf("cri: stopping sandbox %s of pod %s: %w", sb.GetId(), uid, err)
		}
	}
	return s.checkStopped(ctx, uid)
}

// checkStopped asks the runtime whether any container of pod uid runs or
// any of its sandboxes is ready, and says which when one does.
func (s *Syncer) checkStopped(ctx context.Context, uid types.UID) error {
	running, err := s.containers.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: containerFilter(uid).LabelSelector,
	})
	if err != nil {
		return fmt.Errorf("cri: listing the running containers of pod %s: %w", uid, err)
	}
	ready, err := s.sandboxes.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: sandboxFilter(uid).LabelSelector,
	})
	if err != nil {
		return fmt.Errorf("cri: listing the ready sandboxes of pod %s: %w", uid, err)
	}
	if len(running) == 0 && len(ready) == 0 {
		return nil
	}
	names := make([]string, 0, len(running))
	for _, c := range running {
		names = append(names, c.GetMetadata().GetName())
	}
	return fmt.Errorf("cri: pod %s still runs: containers %q, %d ready sandbox(es)", uid, names, len(ready))
}

// removeAll removes every container, then every sandbox, of pod uid. It
// refuses while anything of the pod runs: stopping is SyncTerminatingPod's
// job, with the pod's grace period.
func (s *Syncer) removeAll(ctx context.Context, uid types.UID) error {
	if err := s.checkStopped(ctx, uid); err != nil {
		return fmt.Errorf("cri: not removing pod %s: %w", uid, err)
	}
	containers, err := s.containers.ListContainers(ctx, containerFilter(uid))
	if err != nil {
		return fmt.Errorf("cri: listing the containers of pod %s: %w", uid, err)
	}
	for _, c := range containers {
		if err := s.containers.RemoveContainer(ctx, c.GetId()); err != nil && !isNotFound(err) {
			return fmt.Errorf("cri: removing container %q (%s) of pod %s: %w", c.GetMetadata().GetName(), c.GetId(), uid, err)
		}
	}
	sandboxes, err := s.sandboxes.ListPodSandbox(ctx, sandboxFilter(uid))
	if err != nil {
		return fmt.Errorf("cri: listing the sandboxes of pod %s: %w", uid, err)
	}
	for _, sb := range sandboxes {
		if err := s.sandboxes.RemovePodSandbox(ctx, sb.GetId()); err != nil && !isNotFound(err) {
			return fmt.Errorf("cri: removing sandbox %s of pod %s: %w", sb.GetId(), uid, err)
		}
	}
	return nil
}
