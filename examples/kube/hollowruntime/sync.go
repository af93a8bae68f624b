package hollowruntime

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/podworker"
)

// SyncPod brings the pod's hollow containers in line with its spec and
// returns at once (see the package doc for the life it follows). It
// returns terminal true when the pod is done by its restart policy; an
// error wrapping ErrBackOff (a podworker.RetryAfter) while a restart waits
// out its backoff, or ErrCreateContainerConfig while a container cannot be
// created. A UID cleaned up by SyncTerminatedPod starts clean. status is
// not used: the runtime reads its own state.
func (r *Runtime) SyncPod(ctx context.Context, _ podworker.UpdateType, spec, _ *v1.Pod, _ processruntime.PodStatus) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false, ErrClosed
	}
	p := r.pods[spec.UID]
	if p != nil && p.cleaned {
		r.releaseIPLocked(p)
		p = nil
	}
	if p == nil {
		p = &pod{uid: spec.UID, namespace: spec.Namespace, name: spec.Name, startedAt: r.clock.Now(), spec: spec, containers: map[string]*container{}}
		r.pods[spec.UID] = p
		r.allocateIPLocked(p)
	}
	if p.terminating {
		r.mu.Unlock()
		return false, fmt.Errorf("hollowruntime: SyncPod for pod %s after its termination began; the UID must be cleaned up (SyncTerminatedPod) before it starts again", podName(spec))
	}
	startedAt := metav1.NewTime(p.startedAt)
	r.mu.Unlock()

	f := r.features.Load()
	if f != nil && f.Deadline != nil {
		past, err := f.Deadline.Check(spec, &startedAt)
		if err != nil {
			return false, fmt.Errorf("hollowruntime: pod %s: %w", podName(spec), err)
		}
		if past {
			r.mu.Lock()
			p.deadlineExceeded = true
			r.mu.Unlock()
			return true, nil
		}
	}

	startedNow := map[*container]bool{}
	for {
		r.mu.Lock()
		if p.terminating {
			r.mu.Unlock()
			return false, fmt.Errorf("hollowruntime: SyncPod for pod %s after its termination began", podName(spec))
		}
		p.spec = spec
		trackContainersLocked(p, spec)
		pl := r.planLocked(p, spec, r.clock.Now())
		var todo []*container
		for _, c := range pl.start {
			if !startedNow[c] {
				todo = append(todo, c)
			}
		}
		var backOffEv []processruntime.Event
		if len(todo) == 0 && pl.wait > 0 {
			backOffEv = append(backOffEv, r.eventLocked(processruntime.ContainerBackOff, p, pl.waitFor))
		}
		r.mu.Unlock()

		if len(todo) == 0 {
			switch {
			case pl.terminal:
				return true, nil
			case pl.waiting != nil:
				return false, fmt.Errorf("%w: container %q of pod %s: %s", ErrCreateContainerConfig, pl.waiting.name, podName(spec), pl.waiting.waitMessage)
			case pl.wait > 0:
				r.emit(backOffEv...)
				return false, podworker.RetryAfter(fmt.Errorf("%w: container %q of pod %s may restart in %v", ErrBackOff, pl.waitFor.name, podName(spec), pl.wait.Round(time.Millisecond)), pl.wait)
			}
			return false, nil
		}
		for _, c := range todo {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			startedNow[c] = true
			if err := r.start(ctx, p, spec, c); err != nil {
				return false, err
			}
		}
	}
}

// plan is what SyncPod should do next for a pod.
type plan struct {
	start    []*container
	terminal bool
	// wait is the shortest remaining restart backoff, of container waitFor.
	wait    time.Duration
	waitFor *container
	// waiting is a container that cannot be created.
	waiting *container
}

// trackContainersLocked adds the spec's containers p does not have yet.
func trackContainersLocked(p *pod, spec *v1.Pod) {
	for _, list := range []struct {
		specs []v1.Container
		init  bool
	}{{spec.Spec.InitContainers, true}, {spec.Spec.Containers, false}} {
		for i := range list.specs {
			s := &list.specs[i]
			c := p.containers[s.Name]
			if c == nil {
				c = &container{name: s.Name, init: list.init, state: processruntime.ContainerStateWaiting}
				p.containers[s.Name] = c
			}
			c.image = s.Image
		}
	}
}

// planLocked decides, from p's state at now, which containers start.
func (r *Runtime) planLocked(p *pod, spec *v1.Pod, now time.Time) plan {
	var pl plan
	policy := spec.Spec.RestartPolicy
	if policy == "" {
		policy = v1.RestartPolicyAlways
	}
	// restart adds exited c to the starts, or notes its backoff.
	restart := func(c *container) {
		if w := r.restartWait(c, now); w > 0 {
			if pl.waitFor == nil || w < pl.wait {
				pl.wait, pl.waitFor = w, c
			}
			return
		}
		pl.start = append(pl.start, c)
	}
	// create adds waiting c to the starts, noting why it waited before.
	create := func(c *container) {
		if c.waitReason != "" && pl.waiting == nil {
			pl.waiting = c
		}
		pl.start = append(pl.start, c)
	}
	initialized := true
inits:
	for i := range spec.Spec.InitContainers {
		s := &spec.Spec.InitContainers[i]
		c := p.containers[s.Name]
		if s.RestartPolicy != nil && *s.RestartPolicy == v1.ContainerRestartPolicyAlways {
			// A sidecar: started here, then kept running.
			switch c.state {
			case processruntime.ContainerStateWaiting:
				create(c)
			case processruntime.ContainerStateExited:
				restart(c)
				if len(pl.start) == 0 || pl.start[len(pl.start)-1] != c {
					initialized = false
					break inits
				}
			}
			continue
		}
		switch {
		case c.state == processruntime.ContainerStateRunning:
			initialized = false
			break inits
		case c.state == processruntime.ContainerStateExited && c.exit.Code == 0:
			continue
		case c.state == processruntime.ContainerStateExited:
			if policy == v1.RestartPolicyNever {
				pl.terminal = true
				pl.start = nil
				return pl
			}
			restart(c)
		default:
			create(c)
		}
		initialized = false
		break inits
	}
	if !initialized {
		return pl
	}
	done := len(spec.Spec.Containers) > 0
	for i := range spec.Spec.Containers {
		c := p.containers[spec.Spec.Containers[i].Name]
		switch c.state {
		case processruntime.ContainerStateWaiting:
			done = false
			create(c)
		case processruntime.ContainerStateRunning:
			done = false
		case processruntime.ContainerStateExited:
			if policy == v1.RestartPolicyAlways || policy == v1.RestartPolicyOnFailure && c.exit.Code != 0 {
				done = false
				restart(c)
			}
		}
	}
	pl.terminal = done
	return pl
}

// start starts one run of c: its program and environment first (an error
// there leaves it waiting, CreateContainerConfigError), then it runs;
// a program that exits at once has exited when start returns.
func (r *Runtime) start(ctx context.Context, p *pod, spec *v1.Pod, c *container) error {
	cspec := containerSpec(spec, c.name)
	prog, err := r.program(spec, cspec, c.init)
	if err == nil {
		err = r.buildEnv(ctx, p, spec, cspec)
	}
	r.mu.Lock()
	if err != nil {
		reason, msg := reasonCreateContainerConfigError, err.Error()
		var ce *podenv.ConfigError
		if errors.As(err, &ce) {
			reason, msg = ce.Reason(), ce.Message
		}
		changed := c.waitReason != reason || c.waitMessage != msg
		c.waitReason, c.waitMessage = reason, msg
		var evs []processruntime.Event
		if changed {
			ev := r.eventLocked(processruntime.ContainerFailed, p, c)
			ev.Reason, ev.Message = reason, msg
			evs = append(evs, ev)
		}
		r.mu.Unlock()
		r.emit(evs...)
		return fmt.Errorf("%w: container %q of pod %s: %s", ErrCreateContainerConfig, c.name, podName(spec), msg)
	}
	if r.closed || p.terminating {
		r.mu.Unlock()
		return fmt.Errorf("hollowruntime: pod %s is being stopped", podName(spec))
	}
	now := r.clock.Now()
	if c.state == processruntime.ContainerStateExited {
		// A restart: the exit becomes the last one, and the backoff grows.
		c.restarts++
		c.lastExit, c.exit = c.exit, nil
		if c.backOff == 0 {
			c.backOff = r.backOff
		} else {
			c.backOff = min(2*c.backOff, r.maxBackOff)
		}
	}
	c.runs++
	c.state, c.startedAt, c.program = processruntime.ContainerStateRunning, now, prog
	r.starts++
	c.id = fmt.Sprintf("hollow://%s/%s/%d", p.uid, c.name, r.starts)
	c.waitReason, c.waitMessage = "", ""
	evs := []processruntime.Event{r.eventLocked(processruntime.ContainerStarted, p, c)}
	if prog.Exits {
		if prog.After == 0 {
			r.exitLocked(c, prog.Code, 0, now)
			evs = append(evs, r.eventLocked(processruntime.ContainerExited, p, c))
		} else {
			run := c.runs
			// In a goroutine of its own: a fake clock calls AfterFunc's
			// function under its lock, and exitOnItsOwn reads the clock.
			c.timer = r.clock.AfterFunc(prog.After, func() { go r.exitOnItsOwn(p, c, run) })
		}
	}
	r.mu.Unlock()
	r.emit(evs...)
	return nil
}

// exitOnItsOwn ends run of c (its program's timer fired), unless that run
// already ended.
func (r *Runtime) exitOnItsOwn(p *pod, c *container, run int) {
	r.mu.Lock()
	if r.closed || c.runs != run || c.state != processruntime.ContainerStateRunning {
		r.mu.Unlock()
		return
	}
	c.timer = nil
	r.exitLocked(c, c.program.Code, 0, r.clock.Now())
	ev := r.eventLocked(processruntime.ContainerExited, p, c)
	r.mu.Unlock()
	r.emit(ev)
}

// exitLocked ends c's current run with code (signal, when not 0, is what
// ended it) at now.
func (r *Runtime) exitLocked(c *container, code, signal int32, now time.Time) {
	c.stopTimer()
	reason := processruntime.ReasonCompleted
	if code != 0 {
		reason = processruntime.ReasonError
	}
	c.exit = &processruntime.ExitStatus{Code: code, Signal: signal, Reason: reason, StartedAt: c.startedAt, FinishedAt: now, ID: c.id}
	c.state = processruntime.ContainerStateExited
}

// buildEnv builds the container's environment with the per-pod features,
// for its errors (a missing config map or secret): nothing uses it.
func (r *Runtime) buildEnv(ctx context.Context, p *pod, spec *v1.Pod, cspec *v1.Container) error {
	f := r.features.Load()
	if f == nil || f.Env == nil {
		return nil
	}
	in := podenv.Inputs{HostIPs: r.hostIPs}
	r.mu.Lock()
	in.PodIPs = r.podIPsLocked(p)
	r.mu.Unlock()
	vars, err := f.Env.Build(ctx, spec, cspec, in)
	if err != nil {
		return err
	}
	_, _, err = f.Env.ExpandCommandAndArgs(cspec, vars)
	return err
}

// containerSpec returns the spec of pod's (init or regular) container
// named name.
func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return &v1.Container{Name: name}
}

func podName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
