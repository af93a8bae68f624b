package probe

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/lifecycle/internal/action"
	"github.com/podkit/podkit/podworker"
)

// UpdatePodStatus is the runtime's one call per status it builds for the
// pod (in SyncPod, and in SyncTerminatingPod for the final status). status
// is what the runtime found — the container statuses with their
// ContainerID and State, the pod's IP, the phase — and UpdatePodStatus:
//
//   - makes the pod's probes on first sight (one worker per container and
//     probe type; a probe's spec is read once, as the API server keeps
//     probes immutable), and drops every probe of a pod the window says
//     cannot run;
//   - records each container's current run: a new ContainerID (or a new
//     start time for the same ID) resets its results, so a restarted
//     container starts unready and unstarted again (a run that the pod's
//     own API status, pod.Status, already shows started or ready keeps
//     that: an agent that restarts adopts its containers without flipping
//     them);
//   - sets Started and Ready on every container status as the kubelet
//     does (a regular init container is Ready once it exited 0), and asks
//     for a readiness check at once for a started container not yet ready;
//   - sets the ContainersReady and Ready conditions by podkit's rules
//     (internal/podstatus: sidecars count, a terminal phase is never
//     ready, readiness gates are read from pod.Status.Conditions). The
//     conditions carry no transition time where they changed: the caller
//     sets it.
//
// It returns the errors of probes that cannot run (see Validate; also an
// exec probe with no Options.Exec): such a probe never passes, so its
// container is never ready (readiness) or started (startup). The rest of
// the status is filled in all the same. A nil pod or status, or a pod
// with no UID, is an error and nothing is done. pod and status stay the
// caller's; the manager keeps pod, which must not be modified after.
// It is safe for concurrent use.
func (m *Manager) UpdatePodStatus(pod *v1.Pod, status *v1.PodStatus) error {
	switch {
	case pod == nil:
		return errors.New("probe: UpdatePodStatus needs a pod, got nil")
	case status == nil:
		return fmt.Errorf("probe: UpdatePodStatus of pod %s/%s needs a status, got nil", pod.Namespace, pod.Name)
	case pod.UID == "":
		return fmt.Errorf("probe: UpdatePodStatus: pod %s/%s has no UID", pod.Namespace, pod.Name)
	}
	uid := pod.UID
	couldRun := m.window.CouldHaveRunningContainers(uid)
	terminating := couldRun && m.window.IsPodTerminationRequested(uid)
	now := m.opts.Clock.Now()

	m.mu.Lock()
	var errs []error
	var p *podProbes
	if !couldRun {
		m.removePodLocked(uid)
	} else {
		p = m.pods[uid]
		if p == nil {
			p = &podProbes{workers: make(map[wkey]*worker)}
			m.pods[uid] = p
		}
		p.pod, p.host = pod, status.PodIP
		if m.opts.Host != "" {
			p.host = m.opts.Host
		}
		errs = m.syncWorkersLocked(uid, p, terminating, now)
		m.observeLocked(uid, p, status.InitContainerStatuses, now)
		m.observeLocked(uid, p, status.ContainerStatuses, now)
	}
	for i := range status.InitContainerStatuses {
		cs := &status.InitContainerStatuses[i]
		if c := containerOf(pod.Spec.InitContainers, cs.Name); c != nil && !podstatus.IsSidecar(c) {
			started := cs.State.Running != nil
			cs.Started = &started
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
			continue
		}
		m.fillLocked(uid, p, pod, cs, now)
	}
	for i := range status.ContainerStatuses {
		m.fillLocked(uid, p, pod, &status.ContainerStatuses[i], now)
	}
	m.mu.Unlock()
	if terminating {
		// A pod being stopped is not ready, whatever its readiness
		// probes last said: it is on its way out of its Services.
		for i := range status.InitContainerStatuses {
			status.InitContainerStatuses[i].Ready = false
		}
		for i := range status.ContainerStatuses {
			status.ContainerStatuses[i].Ready = false
		}
	}

	cr := podstatus.ContainersReadyCondition(&pod.Spec, status.Phase, status.InitContainerStatuses, status.ContainerStatuses)
	podstatus.SetCondition(status, cr)
	podstatus.SetCondition(status, podstatus.ReadyCondition(pod, cr))
	return errors.Join(errs...)
}

// syncWorkersLocked makes the workers of p.pod's probes that do not exist
// yet, drops those of probes the spec no longer has, and stops liveness
// probes of a terminating pod. It returns the errors of the
// probes that cannot run.
func (m *Manager) syncWorkersLocked(uid types.UID, p *podProbes, terminating bool, now time.Time) []error {
	var errs []error
	want := make(map[wkey]bool, len(p.workers))
	for _, c := range probed(p.pod) {
		for _, t := range allTypes {
			pr := probeOf(c, t)
			if pr == nil {
				continue
			}
			wk := wkey{c.Name, t}
			want[wk] = true
			w := p.workers[wk]
			if w == nil {
				s, err := complete(c, t, pr)
				if err == nil && s.handler == handlerExec && m.opts.Exec == nil {
					err = fmt.Errorf("probe: container %q: %s.exec needs an ExecRunner (Options.Exec), and none was given", c.Name, t.field())
				}
				w = newWorker(c, t, pr, s, err)
				p.workers[wk] = w
				if err == nil && !terminating {
					m.sched.Set(key{uid, wk}, now.Add(m.firstDelay(s.period, now)))
				}
			}
			if w.invalid != nil {
				errs = append(errs, w.invalid)
			}
			if terminating && !w.stopped {
				w.stop()
				m.sched.Remove(key{uid, wk})
			}
		}
	}
	for wk := range p.workers {
		if !want[wk] {
			delete(p.workers, wk)
			m.sched.Remove(key{uid, wk})
		}
	}
	return errs
}

// observeLocked records the current run of each container of statuses
// that has probes.
func (m *Manager) observeLocked(uid types.UID, p *podProbes, statuses []v1.ContainerStatus, now time.Time) {
	for i := range statuses {
		cs := &statuses[i]
		for _, t := range allTypes {
			w := p.workers[wkey{cs.Name, t}]
			if w == nil {
				continue
			}
			if cs.ContainerID == "" {
				w.forget()
				continue
			}
			in := instanceOf(p.pod, cs)
			if w.observe(in, seedOf(p.pod, cs, t)) && w.live() && in.running {
				k := key{uid, wkey{cs.Name, t}}
				if _, ok := m.sched.Due(k); !ok {
					m.sched.Set(k, now) // a worker idle since its last run ended
				}
			}
		}
	}
}

// instanceOf returns the run cs reports.
func instanceOf(pod *v1.Pod, cs *v1.ContainerStatus) instance {
	in := instance{id: cs.ContainerID}
	switch st := cs.State; {
	case st.Running != nil:
		in.running, in.startedAt = true, st.Running.StartedAt.Time
	case st.Terminated != nil:
		in.startedAt = st.Terminated.StartedAt.Time
		c, init := containerOf(pod.Spec.Containers, cs.Name), false
		if c == nil {
			c = containerOf(pod.Spec.InitContainers, cs.Name)
			init = c != nil
		}
		in.final = !podstatus.IsSidecar(c) && !podstatus.ShouldRestart(pod.Spec.RestartPolicy, init, st.Terminated.ExitCode)
	}
	return in
}

// seedOf returns the result the pod's own API status gives the run cs
// reports, for a probe of type t: success when pod.Status shows that same
// run (same ContainerID) started (startup) or ready (readiness).
func seedOf(pod *v1.Pod, cs *v1.ContainerStatus, t Type) result {
	if cs.State.Running == nil || t == Liveness {
		return resultUnknown
	}
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			old := &list[i]
			if old.Name != cs.Name || old.ContainerID != cs.ContainerID {
				continue
			}
			if t == Startup && old.Started != nil && *old.Started || t == Readiness && old.Ready {
				return resultSuccess
			}
		}
	}
	return resultUnknown
}

// fillLocked sets cs's Started and Ready, marks a started container's
// startup probe announced (its liveness and readiness probes may run), and
// asks for a readiness check now for a started, running container that is
// not ready.
func (m *Manager) fillLocked(uid types.UID, p *podProbes, pod *v1.Pod, cs *v1.ContainerStatus, now time.Time) {
	running := cs.State.Running != nil
	started := running && startedOf(p, pod, cs.Name, cs.ContainerID)
	cs.Started = &started
	cs.Ready = started && readyOf(p, pod, cs.Name, cs.ContainerID)
	if !started || p == nil {
		return
	}
	if sw := p.workers[wkey{cs.Name, Startup}]; sw != nil {
		sw.announced = true // startedOf held: sw's run is cs's
	}
	if cs.Ready {
		return
	}
	k := key{uid, wkey{cs.Name, Readiness}}
	if w := p.workers[k.wkey]; w != nil && !w.checking && w.due(now, true) {
		m.sched.Set(k, now)
	}
}

// startedOf reports whether the run id of the pod's container has started:
// it has no startup probe, or that probe passed for this run. A probe in
// the spec that has no worker yet has not passed.
func startedOf(p *podProbes, pod *v1.Pod, container, id string) bool {
	return passed(p, pod, container, id, Startup)
}

// readyOf reports whether the run id is ready: started, and it has no
// readiness probe or that probe passed for this run.
func readyOf(p *podProbes, pod *v1.Pod, container, id string) bool {
	return startedOf(p, pod, container, id) && passed(p, pod, container, id, Readiness)
}

// passed reports whether the container's probe of type t, if it has one,
// holds success for the run id.
func passed(p *podProbes, pod *v1.Pod, container, id string, t Type) bool {
	var w *worker
	if p != nil {
		w = p.workers[wkey{container, t}]
	}
	if w == nil {
		c, _, ok := action.FindContainer(pod, container)
		return !ok || probeOf(c, t) == nil
	}
	return w.invalid == nil && w.hasInst && w.inst.id == id && w.result == resultSuccess
}

// IsStarted reports whether the running container of pod named container,
// in its run id (the ContainerID of its status), has started: it has no
// startup probe, or the probe passed for that run. Started is what
// UpdatePodStatus sets; the runtime may ask before it builds a status. It
// is safe for concurrent use; a nil pod is not started.
func (m *Manager) IsStarted(pod *v1.Pod, container, id string) bool {
	if pod == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return startedOf(m.pods[pod.UID], pod, container, id)
}

// IsReady reports whether the running container of pod named container,
// in its run id, is ready: it has started, and it has no readiness probe
// or the probe passed for that run. It is safe for concurrent use; a nil
// pod is not ready.
func (m *Manager) IsReady(pod *v1.Pod, container, id string) bool {
	if pod == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return readyOf(m.pods[pod.UID], pod, container, id)
}

// Restart says why and how a running container must be killed: its
// liveness or startup probe failed.
type Restart struct {
	// Probe is Liveness or Startup.
	Probe Type
	// Message is the kubelet's: "Container NAME failed liveness probe"
	// (or startup). The runtime's Killing event says it, with ", will be
	// restarted" when the restart policy starts the container again, as
	// the kubelet does; the container is killed in either case.
	Message string
	// GracePeriodSeconds is the grace to stop the container with, by the
	// kubelet's rule: the pod's deletion grace period if it has one, else
	// the probe's own terminationGracePeriodSeconds if set, else the
	// pod's spec.terminationGracePeriodSeconds, else 2 (the kubelet's
	// least for a container); within [1, podworker.MaxGracePeriodSeconds].
	// A preStop hook runs within it (lifecycle/containerhook).
	GracePeriodSeconds int64
}

// defaultKillGrace is the kubelet's grace period for a container of a pod
// whose spec sets none (minimumGracePeriodInSeconds).
const defaultKillGrace = 2

// ShouldRestart reports whether the running container of pod named
// container, in its run id, must be killed because its liveness probe
// failed (checked first) or its startup probe did, and how. The engine has
// no per-container restart: the runtime's SyncPod asks this of each
// running container, kills those it names and starts them again by their
// restart policy; a failing probe asks for that sync through RequestSync.
// The answer holds until the container's next run. It is safe for
// concurrent use; a nil pod gives false.
func (m *Manager) ShouldRestart(pod *v1.Pod, container, id string) (Restart, bool) {
	if pod == nil {
		return Restart{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pods[pod.UID]
	if p == nil {
		return Restart{}, false
	}
	for _, t := range [...]Type{Liveness, Startup} {
		w := p.workers[wkey{container, t}]
		if w == nil || w.invalid != nil || !w.hasInst || w.inst.id != id || w.result != resultFailure {
			continue
		}
		return Restart{
			Probe:              t,
			Message:            fmt.Sprintf("Container %s failed %s probe", container, map[Type]string{Liveness: "liveness", Startup: "startup"}[t]),
			GracePeriodSeconds: killGrace(pod, w.set.grace),
		}, true
	}
	return Restart{}, false
}

// killGrace is Restart.GracePeriodSeconds's rule.
func killGrace(pod *v1.Pod, probeGrace *int64) int64 {
	g := int64(defaultKillGrace)
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case probeGrace != nil:
		g = *probeGrace
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	return min(max(g, 1), podworker.MaxGracePeriodSeconds)
}

// containerOf returns the container named name in list, or nil.
func containerOf(list []v1.Container, name string) *v1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}
