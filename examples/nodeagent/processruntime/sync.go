package processruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/podworker"
)

// SyncPod brings the pod's processes in line with its spec and returns at
// once; it never waits for a container to run or end. Init containers run
// first, one at a time in order, each until it succeeds, or, for a sidecar
// (restartPolicy Always), until it is started, and then kept running (see
// sidecars.go); then every regular container is started. An ephemeral container is started once, when it
// appears, whatever the init containers do (see ephemeral.go). An exited container is restarted as restartPolicy
// says (Always: always; OnFailure: after a non-zero exit; Never: never;
// a failed init container is retried unless Never): the first restart at
// once, later ones after an exponential backoff, during which SyncPod
// returns an error wrapping ErrBackOff that tells the engine when to
// retry. Running containers are left alone, so SyncPod is idempotent.
//
// It returns terminal true when the pod is done by its restart policy: an
// init container failed under Never, or every regular container exited and
// none is to be restarted (sidecars still running are stopped by
// SyncTerminatingPod, after them).
//
// A UID cleaned up by SyncTerminatedPod in this run starts clean: the
// engine only syncs it again to restart it. A tombstone an earlier run left
// (the agent restarted) is instead continued from: its containers' exits
// are judged by the restart policy as if they had just happened, so a pod
// that finished is reported terminal at once and nothing starts, while a
// container due for a restart (Always, or OnFailure after a failure) is
// started again, its restart count going on.
//
// A container's command is resolved from its spec and its image's
// configuration (see command.go); one that cannot be resolved waits in
// CreateContainerConfigError (or CreateContainerError), and SyncPod
// returns an error wrapping ErrCreateContainerConfig, retried. A command
// that cannot be found or started is recorded as an exit with code 128
// and ReasonStartError (its status waits in RunContainerError, then
// CrashLoopBackOff), and then follows the restart policy like any exit. An error wrapping ErrUnsupported means the pod cannot run here
// (see ValidatePod). status is not used: the runtime reads its own state.
func (r *Runtime) SyncPod(ctx context.Context, _ podworker.UpdateType, pod, _ *v1.Pod, _ PodStatus) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if r.closed() {
		return false, ErrClosed
	}
	if err := r.ValidatePod(pod); err != nil {
		return false, err
	}
	p, terminal, err := r.ensurePod(pod)
	if err != nil || terminal {
		return terminal, err
	}
	if terminal, err := r.beforeStarts(ctx, p, pod); err != nil || terminal {
		return terminal, err
	}
	defer r.reportProbes(p, pod)
	r.killUnhealthy(ctx, p, pod)
	startedNow := map[*container]bool{}
	for {
		r.mu.Lock()
		if p.terminating {
			r.mu.Unlock()
			return false, fmt.Errorf("processruntime: SyncPod for pod %s after its termination began; the UID must be cleaned up (SyncTerminatedPod) before it starts again", podName(pod))
		}
		p.spec = pod
		trackContainersLocked(p, pod)
		trackEphemeralLocked(p, pod)
		pl := r.planLocked(p, pod, r.clock.Now())
		pl.start = append(pl.start, ephemeralStartsLocked(p, pod, pl)...)
		var todo []*container
		for _, c := range pl.start {
			if !startedNow[c] {
				c.starting = true
				todo = append(todo, c)
			}
		}
		r.mu.Unlock()

		if len(todo) == 0 {
			switch {
			case pl.terminal:
				return true, nil
			case pl.waiting != nil:
				return false, fmt.Errorf("%w: container %q of pod %s: %s", ErrCreateContainerConfig, pl.waitingFor, podName(pod), pl.waiting.Message)
			case pl.wait > 0:
				r.emitBackOff(p, pl.waitFor)
				return false, podworker.RetryAfter(fmt.Errorf("%w: container %q of pod %s may restart in %v", ErrBackOff, pl.waitFor, podName(pod), pl.wait.Round(time.Millisecond)), pl.wait)
			}
			return false, nil
		}
		if err := r.prepareStarts(ctx, p, pod); err != nil {
			r.mu.Lock()
			for _, c := range todo {
				c.starting = false
			}
			r.mu.Unlock()
			return false, err
		}
		for i, c := range todo {
			if err := ctx.Err(); err != nil {
				r.mu.Lock()
				for _, rest := range todo[i:] {
					rest.starting = false
				}
				r.mu.Unlock()
				return false, err
			}
			startedNow[c] = true
			r.start(ctx, p, pod, c)
			r.postStart(ctx, p, pod, c)
		}
	}
}

// plan is what SyncPod should do next for a pod.
type plan struct {
	start    []*container
	terminal bool
	// wait is the shortest remaining restart backoff, for container waitFor.
	wait    time.Duration
	waitFor string
	// waiting is why container waitingFor cannot be created, if one
	// cannot.
	waiting    *reasonMessage
	waitingFor string
}

// prepareStarts readies the pod for its containers to start: its
// sandbox, or, for a pod run without one, its limits (once) and the
// warning that its volumes are not mounted.
func (r *Runtime) prepareStarts(ctx context.Context, p *podState, pod *v1.Pod) error {
	if r.sandboxes != nil {
		return r.ensureSandbox(ctx, p, pod)
	}
	r.mu.Lock()
	limited := p.limited
	p.limited = true
	r.mu.Unlock()
	if !limited {
		if err := r.limits.apply(p.uid, limitsOf(pod, r.pidsLimit)); err != nil {
			r.log.Error(err, "Cannot apply the pod's limits", "pod", podName(pod))
		}
	}
	for _, c := range allContainers(pod) {
		if len(c.VolumeMounts) > 0 {
			r.emitWarning(p, "", reasonMessage{ReasonVolumesNotMounted, "the pod's volumes are not mounted: this node runs pods without a sandbox (" + r.noSandboxReason + "), so a mountPath is just a path on the host"})
			break
		}
	}
	return nil
}

// ReasonVolumesNotMounted is the warning of a pod with volume mounts on a
// runtime without sandboxes, which cannot mount them.
const ReasonVolumesNotMounted = "VolumesNotMounted"

// ErrCreateContainerConfig is wrapped by the error SyncPod returns while
// a container cannot be created (it waits in CreateContainerConfigError);
// the engine retries.
var ErrCreateContainerConfig = errors.New("processruntime: " + ReasonCreateContainerConfigError)

// trackContainersLocked gives each container of pod's spec its entry in p
// (a new one has never run) and records the image it runs.
func trackContainersLocked(p *podState, pod *v1.Pod) {
	track := func(specs []v1.Container, init bool) {
		for i := range specs {
			c := p.containers[specs[i].Name]
			if c == nil {
				c = &container{rec: containerRecord{Name: specs[i].Name, Init: init}}
				p.containers[specs[i].Name] = c
			}
			c.image = specs[i].Image
		}
	}
	track(pod.Spec.InitContainers, true)
	track(pod.Spec.Containers, false)
}

// planLocked decides, from the pod's containers, which to start now. It
// reads p and changes nothing; trackContainersLocked must have run for pod.
// Init containers and sidecars are planned by planInitLocked.
func (r *Runtime) planLocked(p *podState, pod *v1.Pod, now time.Time) plan {
	policy := pod.Spec.RestartPolicy
	var pl plan
	initialized, sidecars := r.planInitLocked(p, pod, now, &pl)
	if !initialized {
		if !pl.terminal {
			pl.merge(sidecars)
		}
		return pl
	}
	done := true
	for i := range pod.Spec.Containers {
		c := p.containers[pod.Spec.Containers[i].Name]
		if c.waiting != nil && pl.waiting == nil {
			pl.waiting, pl.waitingFor = c.waiting, c.rec.Name
		}
		switch {
		case c.proc != nil || c.starting:
			done = false
		case c.rec.Exit == nil:
			done = false
			pl.start = append(pl.start, c)
		case podstatus.ShouldRestart(policy, false, c.rec.Exit.Code):
			done = false
			r.startOrWaitLocked(&pl, c, now)
		}
	}
	pl.terminal = done
	if !done {
		// Sidecars are kept running only while the pod is not done.
		pl.merge(sidecars)
	}
	return pl
}

// restartWaitLocked is how long the exited container c must still wait
// before it may start again. The kubelet's rule: the first restart is
// immediate; then each restart waits the current backoff after the exit,
// and the backoff doubles at each restart; a backoff that last grew more
// than 2*MaxBackOff before the exit has expired.
func (r *Runtime) restartWaitLocked(c *container, now time.Time) time.Duration {
	e := c.rec.Exit
	if e == nil || c.rec.BackOff == 0 || r.backOffExpired(c) {
		return 0
	}
	return max(e.FinishedAt.Add(c.rec.BackOff).Sub(now), 0)
}

func (r *Runtime) backOffExpired(c *container) bool {
	return c.rec.Exit != nil && c.rec.Exit.FinishedAt.Sub(c.rec.BackOffSetAt) > 2*r.maxBackOff
}

// advanceBackOffLocked grows c's backoff as it restarts at now.
func (r *Runtime) advanceBackOffLocked(c *container, now time.Time) {
	if c.rec.BackOff == 0 || r.backOffExpired(c) {
		c.rec.BackOff = r.backOff
	} else {
		c.rec.BackOff = min(2*c.rec.BackOff, r.maxBackOff)
	}
	c.rec.BackOffSetAt = now
}

// ensurePod returns the pod's state, creating its directories and identity
// file on first use. For a tombstone it either reports the pod terminal
// (an earlier run's pod that finished), brings the pod back to life (an
// earlier run's pod with a container to restart), or discards it and
// starts the UID clean (a pod cleaned up in this run, now restarted).
func (r *Runtime) ensurePod(pod *v1.Pod) (p *podState, terminal bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p = r.pods[pod.UID]
	if p != nil && p.cleanedUp {
		if !p.earlier {
			if err := os.RemoveAll(p.dir); err != nil {
				return nil, false, fmt.Errorf("processruntime: removing the tombstone of pod %s before it restarts: %w", podName(pod), err)
			}
			delete(r.pods, pod.UID)
			p = nil
		} else {
			p.spec = pod
			trackContainersLocked(p, pod)
			if r.planLocked(p, pod, r.clock.Now()).terminal {
				return p, true, nil
			}
			if err := r.reviveLocked(p, pod); err != nil {
				return nil, false, err
			}
		}
	}
	if p != nil {
		if p.name == "" {
			// Recovered from a record without a name: complete it.
			p.namespace, p.name = pod.Namespace, pod.Name
			if err := r.writePodRecordLocked(p); err != nil {
				p.namespace, p.name = "", ""
				return nil, false, err
			}
		}
		return p, false, nil
	}
	p = &podState{uid: pod.UID, namespace: pod.Namespace, name: pod.Name, dir: r.PodDir(pod.UID), startedAt: r.clock.Now(), containers: map[string]*container{}}
	if err := makePodDirs(p.dir); err != nil {
		return nil, false, fmt.Errorf("processruntime: creating the directory of pod %s: %w", podName(pod), err)
	}
	if err := r.writePodRecordLocked(p); err != nil {
		return nil, false, err
	}
	r.pods[pod.UID] = p
	return p, false, nil
}

// makePodDirs creates a pod directory's subdirectories.
func makePodDirs(dir string) error {
	for _, d := range []string{containersDir, logsDir, scratchDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// reviveLocked turns an earlier run's tombstone back into a live pod whose
// containers are about to restart: its scratch directory is made again
// (empty) and pod.json no longer says cleaned up.
func (r *Runtime) reviveLocked(p *podState, pod *v1.Pod) error {
	if err := makePodDirs(p.dir); err != nil {
		return fmt.Errorf("processruntime: restoring the directory of pod %s: %w", podName(pod), err)
	}
	p.cleanedUp = false
	if err := r.writePodRecordLocked(p); err != nil {
		p.cleanedUp = true
		return err
	}
	p.stopped, p.earlier, p.finalize = false, false, nil
	r.log.Info("Restarting a pod an earlier run had cleaned up, as its restart policy says", "pod", podName(pod), "podUID", p.uid)
	return nil
}

func (r *Runtime) writePodRecordLocked(p *podState) error {
	rec := podRecord{UID: p.uid, Namespace: p.namespace, Name: p.name, StartedAt: p.startedAt, CleanedUp: p.cleanedUp}
	if err := writeJSON(filepath.Join(p.dir, podFile), rec); err != nil {
		return fmt.Errorf("processruntime: recording pod %s/%s: %w", p.namespace, p.name, err)
	}
	return nil
}

// persistLocked writes c's record. A failure is logged: the process runs
// either way, and the next change writes the record again.
func (r *Runtime) persistLocked(p *podState, c *container) {
	if err := writeJSON(filepath.Join(p.dir, containersDir, c.rec.Name+".json"), &c.rec); err != nil {
		r.log.Error(err, "Cannot record a container's process", "pod", p.uid, "container", c.rec.Name)
	}
}
