package cri

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/lifecycle/deadline"
)

// derive is the API status of pod as the syncer reports it: status's
// (FinalAPIStatus when final), past its active deadline (Options.Deadline:
// Failed, DeadlineExceeded) when it is, with Started, Ready and the
// readiness conditions from the probes (Options.Probes). It reports
// whether the pod is past its deadline. A probe that cannot run is logged:
// it never passes, and the rest of the status stands.
func (s *Syncer) derive(ctx context.Context, pod *v1.Pod, status *PodStatus, final bool) (v1.PodStatus, bool) {
	prim := s.features()
	var api v1.PodStatus
	if final {
		api = status.FinalAPIStatus(pod)
	} else {
		api = status.APIStatus(pod)
	}
	log := logr.FromContextOrDiscard(ctx)
	past := false
	if prim.deadline != nil {
		start := api.StartTime
		switch {
		case start == nil && pod.Status.StartTime != nil:
			start = pod.Status.StartTime
		case start == nil:
			// No sandbox yet (its volumes are not ready, say): the
			// deadline counts from the pod's first sync, as the kubelet's
			// status start time does.
			start = s.firstSync(pod.UID, !final)
		}
		var err error
		if past, err = prim.deadline.Check(pod, start); err != nil {
			log.V(1).Info("Checking the active deadline failed", "err", err.Error())
		}
		if past {
			deadline.MarkFailed(&api)
		}
	}
	if prim.probes != nil {
		if err := prim.probes.UpdatePodStatus(pod, &api); err != nil {
			log.V(1).Info("Some probes cannot run: they never pass", "err", err.Error())
		}
	}
	return api, past
}

// firstSync returns when the syncer first derived a status for pod uid,
// recording now as that time when record is set and none is known yet
// (nil when none is known and record is not set). The time is forgotten
// with the pod.
func (s *Syncer) firstSync(uid types.UID, record bool) *metav1.Time {
	s.startsMu.Lock()
	defer s.startsMu.Unlock()
	t, ok := s.starts[uid]
	if !ok {
		if !record {
			return nil
		}
		t = metav1.NewTime(s.opts.Clock.Now())
		s.starts[uid] = t
	}
	return &t
}

// killUnhealthy stops, with the grace the probe manager gives, each
// running container of the ready sandbox whose liveness or startup probe
// failed, as the kubelet does: a Killing event ("Container NAME failed
// liveness probe, will be restarted" when its policy restarts it), its
// preStop hook within the grace period, then StopContainer. It reports
// whether it stopped any; SyncPod then restarts them by their policy.
func (s *Syncer) killUnhealthy(ctx context.Context, pod *v1.Pod, status *PodStatus, sandboxID string, podIPs []string) (bool, error) {
	prim := s.features()
	if prim.probes == nil {
		return false, nil
	}
	killed := false
	var errs []error
	for _, c := range probedContainers(pod) {
		cur := status.latest(c.Name, sandboxID)
		if cur == nil || cur.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		restart, ok := prim.probes.ShouldRestart(pod, c.Name, s.containerID(cur.GetId()))
		if !ok {
			continue
		}
		msg := restart.Message
		if podstatus.IsSidecar(c) || podstatus.ShouldRestart(pod.Spec.RestartPolicy, false, exitCodeKilled) {
			msg += ", will be restarted"
		}
		s.containerEvent(pod, c.Name, v1.EventTypeNormal, EventKilling, msg)
		logr.FromContextOrDiscard(ctx).V(2).Info("Killing container", "container", c.Name, "probe", restart.Probe.String(), "gracePeriod", restart.GracePeriodSeconds)
		if err := s.stopContainer(ctx, pod, c, cur.GetId(), podIPs, restart.GracePeriodSeconds); err != nil {
			errs = append(errs, fmt.Errorf("cri: killing container %q (%s) of pod %s after its %s probe failed: %w",
				c.Name, cur.GetId(), podRef(pod), restart.Probe, err))
			continue
		}
		killed = true
	}
	return killed, errors.Join(errs...)
}

// exitCodeKilled is the exit code of a container killed by a signal it did
// not handle (128 + SIGKILL), as a restart policy reads it.
const exitCodeKilled = 137
