package containerhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/internal/action"
)

// ExecRunner runs an exec hook's command in a container. It is
// lifecycle/probe's ExecRunner (the same type, so one implementation
// serves both); its one method is
//
//	ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (output []byte, exitCode int, err error)
//
// For a hook, timeout is 0: the command is bounded by ctx alone (the
// caller's ctx for postStart, the grace period for preStop), and the
// runner must stop it and return when ctx ends; a call that does not is
// abandoned then, and Wait waits for it. The command is the hook's, as
// written (the kubelet expands no $(VAR) in hooks). err is for a command
// that could not run at all.
type ExecRunner = action.ExecRunner

// ExecRunnerFunc adapts a function to an ExecRunner.
type ExecRunnerFunc = action.ExecRunnerFunc

// Options configure a Runner. The zero value is valid: every field says
// what it defaults to.
type Options struct {
	// Exec runs exec hooks. Defaults to none: an exec hook then fails
	// (a postStart one kills its container).
	Exec ExecRunner
	// Recorder receives the kubelet's hook events (FailedPostStartHook,
	// FailedPreStopHook, LifecycleHTTPFallback). Defaults to
	// event.Discard.
	Recorder event.Recorder
	// Clock measures sleep hooks and the grace period that cuts a preStop
	// hook. Defaults to the real clock.
	Clock clock.WithDelayedExecution
	// Logger receives a failed hook's message at V(1) (it may hold the
	// hook's output, so it goes in no event), a cut preStop at V(2).
	// Defaults to the zero Logger, which discards.
	Logger logr.Logger
}

// Event reasons the Runner records, the kubelet's.
const (
	// ReasonFailedPostStartHook (Warning, "PostStartHook failed"): the
	// container's postStart hook failed; the runtime kills the container.
	ReasonFailedPostStartHook = "FailedPostStartHook"
	// ReasonFailedPreStopHook (Warning, "PreStopHook failed"): the
	// container's preStop hook failed; the stop goes on.
	ReasonFailedPreStopHook = "FailedPreStopHook"
	// ReasonLifecycleHTTPFallback (Warning): an HTTPS hook was answered in
	// plain HTTP, and sent again as HTTP, which worked.
	ReasonLifecycleHTTPFallback = "LifecycleHTTPFallback"
)

// MinimumGracePeriodSeconds is the least grace period, in seconds, the
// kubelet stops a container with, whatever a preStop hook left of it: a
// runtime gives its stop max(left, MinimumGracePeriodSeconds), so that a
// container is not killed at once for a slow hook.
const MinimumGracePeriodSeconds = 2

var (
	// ErrPostStartHook is matched (errors.Is) by PostStart's error when
	// the hook failed: the runtime kills the container (its Killing
	// event's message is ReasonFailedPostStartHook) and reports the
	// container's start as failed with the HookError's Reason and
	// Message, then restarts it by its restart policy, as the kubelet
	// does.
	ErrPostStartHook = errors.New("PostStartHookError")
	// ErrPreStopHook is matched by PreStop's error when the hook failed:
	// informative only, the container is stopped all the same.
	ErrPreStopHook = errors.New("PreStopHookError")
)

// HookError is a hook that failed. Reason is ErrPostStartHook's or
// ErrPreStopHook's text (the kubelet's container-start failure reason);
// Message is the kubelet's message, which may hold the hook's output and
// so belongs in a container status, never in an event.
type HookError struct {
	Reason  string
	Message string
}

// Error returns the reason and the message.
func (e *HookError) Error() string { return e.Reason + ": " + e.Message }

// Is matches ErrPostStartHook or ErrPreStopHook, by Reason.
func (e *HookError) Is(target error) bool {
	return (target == ErrPostStartHook || target == ErrPreStopHook) && target.Error() == e.Reason
}

// Container names the container a hook runs for.
type Container struct {
	// Pod is the container's pod; required.
	Pod *v1.Pod
	// Name is the container's name in Pod's spec (a regular container, an
	// init container or an ephemeral one); required.
	Name string
	// ID is the container's ID as the runtime reports it in the
	// container's status: exec hooks run in it.
	ID string
	// Host is where an httpGet hook that names no host connects: the
	// pod's IP, or "127.0.0.1" for a runtime whose pods share the node's
	// network.
	Host string
}

// Runner runs containers' postStart and preStop hooks. It keeps no state
// of pods and needs no Run: each hook runs on the caller's goroutine
// (SyncPod's, SyncTerminatingPod's), within the caller's ctx, which the pod
// workers end when the pod's termination starts or its grace period
// shortens.
type Runner struct {
	opts  Options
	http  *action.HTTP
	calls action.Calls
}

// New returns a Runner. It starts nothing.
func New(opts Options) *Runner {
	opts.Recorder = event.OrDiscard(opts.Recorder)
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Runner{opts: opts, http: action.NewHTTP("lifecycle")}
}

// Wait blocks until every exec call a hook started has returned: a
// runner call abandoned when its hook was cut (ctx's end, the grace
// period) may outlive the hook. An agent calls it when it shuts down,
// after the pod workers' Run returned.
func (r *Runner) Wait() { r.calls.Wait() }

// lookup checks c and returns its container's spec.
func lookup(hook string, c Container) (*v1.Container, error) {
	if c.Pod == nil {
		return nil, fmt.Errorf("containerhook: %s needs a pod, got nil", hook)
	}
	ctr, _, ok := action.FindContainer(c.Pod, c.Name)
	if !ok {
		return nil, fmt.Errorf("containerhook: %s: pod %s/%s has no container %q", hook, c.Pod.Namespace, c.Pod.Name, c.Name)
	}
	return ctr, nil
}

// run runs handler h for container c and returns the kubelet's message
// for its failure, with the error; "" and nil when it succeeded.
func (r *Runner) run(ctx context.Context, c Container, ctr *v1.Container, h *v1.LifecycleHandler) (string, error) {
	pod := fmt.Sprintf("%s_%s(%s)", c.Pod.Name, c.Pod.Namespace, c.Pod.UID)
	switch {
	case h.Exec != nil:
		res, _ := action.Exec(ctx, &r.calls, r.opts.Exec, c.ID, h.Exec.Command, 0)
		var err error
		switch res.Outcome {
		case action.Success:
			return "", nil
		case action.Failure:
			err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), res.ExitCode, res.Output)
		default:
			err = res.Err
		}
		return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q", h.Exec.Command, c.Name, pod, err, res.Output), err
	case h.HTTPGet != nil:
		fellBack, err := r.http.Hook(ctx, h.HTTPGet, ctr, c.Host)
		if fellBack {
			r.event(c.Pod, ReasonLifecycleHTTPFallback, "request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", hostOf(h.HTTPGet, c.Host))
		}
		if err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, c.Name, pod, err), err
		}
		return "", nil
	case h.Sleep != nil:
		if err := r.sleep(ctx, h.Sleep.Seconds); err != nil {
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v", h.Sleep.Seconds, c.Name, pod, err), err
		}
		return "", nil
	case h.TCPSocket != nil:
		err := errors.New("invalid handler: tcpSocket is not supported as a lifecycle hook")
		return "Cannot run handler: " + err.Error(), err
	}
	err := errors.New("invalid handler: no action is set")
	return "Cannot run handler: " + err.Error(), err
}

// sleep waits seconds on the clock, or until ctx ends (an error: the
// container stopped first).
func (r *Runner) sleep(ctx context.Context, seconds int64) error {
	if seconds < 0 {
		return fmt.Errorf("sleep seconds is %d; want 0 or more", seconds)
	}
	if seconds == 0 {
		return nil
	}
	d := time.Duration(min(seconds, maxSleepSeconds)) * time.Second
	t := r.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return errors.New("container terminated before sleep hook finished")
	}
}

// maxSleepSeconds caps a sleep hook so its duration cannot overflow (the
// field is int64 seconds): a hundred years is forever for a hook.
const maxSleepSeconds = 100 * 365 * 24 * 60 * 60

func hostOf(get *v1.HTTPGetAction, host string) string {
	if get.Host != "" {
		return get.Host
	}
	return host
}

func (r *Runner) event(obj *v1.Pod, reason, format string, args ...any) {
	r.safely(func() { r.opts.Recorder.Eventf(obj, v1.EventTypeWarning, reason, format, args...) })
}

func (r *Runner) containerEvent(c Container, reason, message string) {
	ref := action.ContainerRef(c.Pod, c.Name)
	r.safely(func() { r.opts.Recorder.Eventf(ref, v1.EventTypeWarning, reason, message) })
}

// safely calls the Recorder, surviving a panic in it.
func (r *Runner) safely(f func()) {
	defer func() {
		if p := recover(); p != nil {
			r.opts.Logger.Error(fmt.Errorf("%v", p), "Recorder panicked")
		}
	}()
	f()
}
