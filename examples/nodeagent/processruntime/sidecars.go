package processruntime

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/internal/podstatus"
)

// This file runs sidecars (init containers with restartPolicy Always) as
// the kubelet does:
//
//   - started in order with the other init containers: each is started
//     (sidecarStartedLocked) before the next init container runs;
//   - kept running: restarted whenever they exit, with the restart
//     backoff, whatever the pod's restartPolicy; before the pod is
//     initialized an exited sidecar holds back the init containers after
//     it until it runs again, after that it restarts beside them;
//   - no part of the pod's end: the pod is done once its regular
//     containers are (a Job's pod succeeds with its sidecars running),
//     and a sidecar is not restarted then;
//   - stopped last: at termination the regular (and ephemeral) containers
//     are stopped first, then the sidecars one after another in the
//     reverse of their order, within the one grace period (each given at
//     least minSidecarGrace, as the kubelet's minimum).

// minSidecarGrace is the least time a sidecar is given between SIGTERM
// and SIGKILL when the pod's grace period was used up by the containers
// stopped before it: the kubelet's minimum grace period.
const minSidecarGrace = 2 * time.Second

// restartsAfter reports whether the container spec (an init container
// when init) of pod is started again after exiting with code: a sidecar
// always, the others as the pod's restartPolicy says.
func restartsAfter(pod *v1.Pod, spec *v1.Container, init bool, code int32) bool {
	if init && podstatus.IsSidecar(spec) {
		return true
	}
	return podstatus.ShouldRestart(pod.Spec.RestartPolicy, init, code)
}

// sidecarStartedLocked reports whether the running sidecar c has started,
// so the init container after it may run: once its process runs. (A
// startup probe gates this: the prober's result belongs here.)
func (r *Runtime) sidecarStartedLocked(_ *podState, c *container) bool {
	return c.proc != nil && !c.starting
}

// planInitLocked plans the pod's init containers into pl and reports
// whether the pod is initialized (every regular init container succeeded
// and every sidecar started), so its regular containers may run. The
// restarts of sidecars that need not hold initialization back go into
// sidecars, for the caller to add unless the pod is done.
func (r *Runtime) planInitLocked(p *podState, pod *v1.Pod, now time.Time, pl *plan) (initialized bool, sidecars plan) {
	policy := pod.Spec.RestartPolicy
	inits := pod.Spec.InitContainers
	for i := range inits {
		c := p.containers[inits[i].Name]
		if podstatus.IsSidecar(&inits[i]) {
			switch {
			case c.proc != nil || c.starting:
				if !r.sidecarStartedLocked(p, c) {
					return false, sidecars
				}
			case c.rec.Exit == nil:
				pl.start = append(pl.start, c)
				if c.waiting != nil {
					pl.waiting, pl.waitingFor = c.waiting, c.rec.Name
				}
				return false, sidecars
			case ranAfter(p, pod, i):
				// Exited after what follows it began: restarted beside it.
				r.startOrWaitLocked(&sidecars, c, now)
			default:
				r.startOrWaitLocked(pl, c, now)
				return false, sidecars
			}
			continue
		}
		switch {
		case c.proc != nil || c.starting:
			return false, sidecars
		case c.rec.Exit == nil:
			pl.start = append(pl.start, c)
			if c.waiting != nil {
				pl.waiting, pl.waitingFor = c.waiting, c.rec.Name
			}
			return false, sidecars
		case c.rec.Exit.Code == 0:
			continue
		case !podstatus.ShouldRestart(policy, true, c.rec.Exit.Code):
			pl.terminal = true
			return false, sidecars
		default:
			r.startOrWaitLocked(pl, c, now)
			return false, sidecars
		}
	}
	return true, sidecars
}

// ranAfter reports whether a container after init container i of pod (a
// later init container, or a regular one) has run in this life of the pod.
func ranAfter(p *podState, pod *v1.Pod, i int) bool {
	ran := func(name string) bool {
		c := p.containers[name]
		return c != nil && (c.proc != nil || c.starting || c.rec.Exit != nil)
	}
	for _, ic := range pod.Spec.InitContainers[i+1:] {
		if ran(ic.Name) {
			return true
		}
	}
	for _, mc := range pod.Spec.Containers {
		if ran(mc.Name) {
			return true
		}
	}
	return false
}

// startOrWaitLocked plans the restart of the exited container c: now, or
// after its remaining backoff (the shortest such wait is the plan's).
func (r *Runtime) startOrWaitLocked(pl *plan, c *container, now time.Time) {
	if w := r.restartWaitLocked(c, now); w > 0 {
		if pl.wait == 0 || w < pl.wait {
			pl.wait, pl.waitFor = w, c.rec.Name
		}
		return
	}
	pl.start = append(pl.start, c)
}

// merge adds o's starts and wait to pl.
func (pl *plan) merge(o plan) {
	pl.start = append(pl.start, o.start...)
	if o.wait > 0 && (pl.wait == 0 || o.wait < pl.wait) {
		pl.wait, pl.waitFor = o.wait, o.waitFor
	}
}

// stopInOrder stops procs, the running processes of p, in the kubelet's
// order: every process but the sidecars' at once, then each sidecar in
// the reverse of the spec's order, all within grace (a sidecar gets at
// least minSidecarGrace). Without sidecars (or without the pod's spec, for
// a pod known only from the state directory) it is one stop.
func (r *Runtime) stopInOrder(ctx context.Context, p *podState, procs []*proc, grace time.Duration) error {
	r.mu.Lock()
	var stages [][]*proc
	if spec := p.spec; spec != nil {
		byProc := map[*proc]bool{}
		for _, pr := range procs {
			byProc[pr] = true
		}
		inits := spec.Spec.InitContainers
		for i := len(inits) - 1; i >= 0; i-- {
			if !podstatus.IsSidecar(&inits[i]) {
				continue
			}
			if c := p.containers[inits[i].Name]; c != nil && c.proc != nil && byProc[c.proc] {
				stages = append(stages, []*proc{c.proc})
				delete(byProc, c.proc)
			}
		}
		var first []*proc
		for _, pr := range procs {
			if byProc[pr] {
				first = append(first, pr)
			}
		}
		stages = append([][]*proc{first}, stages...)
	} else {
		stages = [][]*proc{procs}
	}
	r.mu.Unlock()

	deadline := r.clock.Now().Add(grace)
	for i, stage := range stages {
		g := grace
		if i > 0 {
			g = max(deadline.Sub(r.clock.Now()), minSidecarGrace)
		}
		if err := r.stopWithPreStop(ctx, p, stage, g); err != nil {
			return err
		}
	}
	return nil
}
