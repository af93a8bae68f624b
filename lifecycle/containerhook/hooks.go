package containerhook

import (
	"context"
	"fmt"
	"time"

	"github.com/podkit/podkit/lifecycle/internal/action"
)

// PostStart runs the container's postStart hook, if it has one, right
// after the runtime started the container, and returns once it is done,
// as the kubelet does (the container is not reported running before).
// It is called from the goroutine that started the container (SyncPod's);
// ctx bounds the hook (the kubelet gives it no other limit).
//
// A nil error: no hook, or it succeeded. An error matching
// ErrPostStartHook: the hook failed, a FailedPostStartHook event was
// recorded ("PostStartHook failed": the message, which may hold secrets,
// is in the HookError only); the runtime must kill the container. ctx's
// error (wrapped): ctx ended first (the pod is terminating); no event.
// Any other error: c is invalid (no pod, no such container); nothing ran.
func (r *Runner) PostStart(ctx context.Context, c Container) error {
	ctr, err := lookup("PostStart", c)
	if err != nil {
		return err
	}
	if ctr.Lifecycle == nil || ctr.Lifecycle.PostStart == nil {
		return nil
	}
	msg, err := r.run(ctx, c, ctr, ctr.Lifecycle.PostStart)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("containerhook: postStart hook of container %q cut short: %w", c.Name, ctx.Err())
	}
	r.opts.Logger.V(1).Info("PostStart hook failed", "podUID", c.Pod.UID, "container", c.Name, "message", msg)
	r.containerEvent(c, ReasonFailedPostStartHook, "PostStartHook failed")
	return &HookError{Reason: ErrPostStartHook.Error(), Message: msg}
}

// PreStop runs the container's preStop hook, if it has one and
// gracePeriod (seconds) is above 0, before the runtime stops the
// container, and returns the grace period left for the stop: gracePeriod
// less the whole seconds the hook took (the kubelet truncates), which may
// be 0 or less. The hook is cut when gracePeriod has passed on the clock,
// or when ctx ends (the pod workers shortened the grace period, or shut
// down), and PreStop then returns at once; the runtime then stops the
// container with max(left, MinimumGracePeriodSeconds), as the kubelet does.
// It is called from the goroutine that stops the container
// (SyncTerminatingPod's, or SyncPod's for a container killed alone).
//
// A nil error: no hook, it succeeded, or it was cut by the grace period.
// An error matching ErrPreStopHook: it failed, and a FailedPreStopHook
// event ("PreStopHook failed") was recorded; the stop goes on all the
// same. ctx's error (wrapped): ctx ended first; no event. Any other
// error: c is invalid; nothing ran and left is gracePeriod.
func (r *Runner) PreStop(ctx context.Context, c Container, gracePeriod int64) (left int64, err error) {
	ctr, err := lookup("PreStop", c)
	if err != nil {
		return gracePeriod, err
	}
	if ctr.Lifecycle == nil || ctr.Lifecycle.PreStop == nil || gracePeriod <= 0 {
		return gracePeriod, nil
	}
	start := r.opts.Clock.Now()
	hctx, cancel := action.WithTimeout(ctx, r.opts.Clock, time.Duration(min(gracePeriod, maxSleepSeconds))*time.Second)
	defer cancel()
	msg, err := r.run(hctx, c, ctr, ctr.Lifecycle.PreStop)
	left = gracePeriod - int64(r.opts.Clock.Since(start)/time.Second)
	switch {
	case err == nil:
		return left, nil
	case ctx.Err() != nil:
		return left, fmt.Errorf("containerhook: preStop hook of container %q cut short: %w", c.Name, ctx.Err())
	case action.TimedOut(hctx):
		r.opts.Logger.V(2).Info("PreStop hook not completed in grace period", "podUID", c.Pod.UID, "container", c.Name, "gracePeriod", gracePeriod)
		return left, nil
	}
	r.opts.Logger.V(1).Info("PreStop hook failed", "podUID", c.Pod.UID, "container", c.Name, "message", msg)
	r.containerEvent(c, ReasonFailedPreStopHook, "PreStopHook failed")
	return left, &HookError{Reason: ErrPreStopHook.Error(), Message: msg}
}
