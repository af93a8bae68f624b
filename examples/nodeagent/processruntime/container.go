package processruntime

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
)

// start starts c's process (c.starting is set) and records the outcome:
// the process (and, once in the pod's life, the warning that the node's
// program stands in for the image's), an exit with ReasonStartError, or,
// when the container's configuration cannot be applied (runAsNonRoot, a
// command that cannot be resolved), why it waits.
func (r *Runtime) start(ctx context.Context, p *podState, pod *v1.Pod, c *container) {
	spec := findContainer(pod, c.rec.Name)
	now := r.clock.Now()
	var l launch
	if spec != nil {
		waiting := r.ephemeralWaiting(pod, c)
		if waiting == nil {
			_, _, _, waiting = r.identity(pod, spec, effectiveSecurity(pod, spec))
		}
		if waiting == nil {
			waiting = r.containerEnv(ctx, p, pod, spec, c)
		}
		if waiting == nil {
			l, waiting = r.launchOf(pod, spec)
		}
		if waiting != nil {
			r.mu.Lock()
			c.starting = false
			changed := c.waiting == nil || *c.waiting != *waiting
			c.waiting = waiting
			ev := r.eventLocked(ContainerFailed, p, c.rec.Name)
			ev.Reason, ev.Message = waiting.Reason, waiting.Message
			r.mu.Unlock()
			if changed {
				r.log.Info("Container cannot be created", "pod", podName(pod), "container", c.rec.Name, "reason", waiting.Reason, "message", waiting.Message)
				r.emit(ev)
			}
			return
		}
	}

	r.mu.Lock()
	c.waiting = nil
	if c.rec.Exit != nil {
		// A restart.
		r.advanceBackOffLocked(c, now)
		c.rec.Restarts++
		c.rec.LastExit, c.rec.Exit = c.rec.Exit, nil
	}
	c.rec.Starting = true
	instance := c.rec.Restarts
	r.persistLocked(p, c)
	r.mu.Unlock()

	var pr *proc
	var cmd *exec.Cmd
	var err error
	if p.sb != nil && spec != nil {
		t0 := time.Now()
		pr, err = r.startSandboxed(p, pod, spec, instance)
		traceStage("container", t0)
	} else {
		pr, cmd, err = r.startProcess(p, pod, spec, instance)
	}

	r.mu.Lock()
	c.starting = false
	c.rec.Starting = false
	if err != nil {
		end := r.clock.Now()
		c.rec.Exit = &ExitStatus{Code: 128, Reason: ReasonStartError, Message: err.Error(), FinishedAt: end}
		r.persistLocked(p, c)
		ev := r.eventLocked(ContainerExited, p, c.rec.Name)
		r.mu.Unlock()
		r.log.Info("Container failed to start", "pod", podName(pod), "container", c.rec.Name, "err", err.Error())
		r.emit(ev)
		return
	}
	c.proc = pr
	c.rec.PID, c.rec.PGID, c.rec.StartTicks, c.rec.BootID, c.rec.StartedAt, c.rec.Cgroup = pr.pid, pr.pgid, pr.startTicks, r.bootID, pr.startedAt, pr.cgroup
	r.persistLocked(p, c)
	ev := r.eventLocked(ContainerStarted, p, c.rec.Name)
	r.mu.Unlock()
	r.log.V(2).Info("Container started", "pod", podName(pod), "container", c.rec.Name, "pid", pr.pid)

	if pr.sb != nil {
		r.goWatcher(func() { r.reapSandboxed(p, c, pr) })
	} else {
		go r.reap(p, c, pr, cmd)
	}
	r.emit(ev)
	if spec != nil {
		r.emitWarning(p, c.rec.Name, r.hostProgramWarning(spec, l))
	}
}

// findContainer returns the spec of the pod's container name: init,
// regular or ephemeral.
func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	spec, _ := ephemeralSpec(pod, name)
	return spec
}

func containerID(pid int, startTicks uint64) string {
	return fmt.Sprintf("process://%d.%d", pid, startTicks)
}

// reap waits for the process to exit, kills what it left in its group
// while its PID is still reserved, reaps it, waits for its log to be
// complete and records the exit.
func (r *Runtime) reap(p *podState, c *container, pr *proc, cmd *exec.Cmd) {
	awaitExit(pr.pid) // holds no thread for the container's life
	werr := waitExitedNoReap(pr.pid)
	pr.mu.Lock()
	if werr == nil {
		// The leader is a zombie, so its group ID cannot be reused yet.
		if err := signalGroup(pr.pgid, syscall.SIGKILL); err != nil {
			r.log.Error(err, "Cannot kill processes a container left behind", "pod", p.uid, "container", c.rec.Name)
		}
		r.killContainerLeftovers(p.uid, c.rec.Name, pr.cgroup)
	}
	exit := exitStatus(cmd.Wait(), cmd.ProcessState)
	pr.reaped = true
	pr.mu.Unlock()
	r.awaitLogShim(pr.shim)
	exit.StartedAt, exit.FinishedAt, exit.ID = pr.startedAt, r.clock.Now(), pr.id
	r.exited(p, c, pr, exit)
}

// exited records the end of pr, then announces it.
func (r *Runtime) exited(p *podState, c *container, pr *proc, exit ExitStatus) {
	r.mu.Lock()
	if c.proc == pr {
		c.proc = nil
		c.rec.PID, c.rec.PGID, c.rec.StartTicks = 0, 0, 0
		c.rec.Exit = &exit
		if r.pods[p.uid] == p {
			r.persistLocked(p, c)
		}
	}
	ev := r.eventLocked(ContainerExited, p, c.rec.Name)
	r.mu.Unlock()
	r.log.V(2).Info("Container exited", "pod", p.uid, "container", c.rec.Name, "code", exit.Code, "reason", exit.Reason)
	// Announce before done closes, so PodStopped always follows.
	r.emit(ev)
	close(pr.done)
}

// signal sends sig to pr's process group, unless pr has already ended.
func (r *Runtime) signal(pr *proc, sig syscall.Signal) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.reaped {
		return
	}
	if pr.sb != nil {
		r.signalSandboxed(pr, sig)
		return
	}
	if pr.adopted && !sameProcess(pr.pid, pr.startTicks) {
		// Not our child: its PID may already belong to someone else. Its
		// watcher kills what it left behind.
		return
	}
	if err := signalGroup(pr.pgid, sig); err != nil {
		r.log.Error(err, "Cannot signal a container process", "pid", pr.pid)
	}
}
