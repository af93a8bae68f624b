package podstatus

import v1 "k8s.io/api/core/v1"

// ExitCodeUnknown is the exit code the kubelet reports for a container
// whose end it could not see (reason ContainerStatusUnknown): 137, as if
// the container was killed. Pass it to ShouldRestart for such a container:
// it counts as failed.
const ExitCodeUnknown = 137

// ShouldRestart reports whether a container that exited with exitCode is
// started again under the pod's restartPolicy. A regular container is
// never restarted under Never, restarted under OnFailure when it failed
// (a non-zero exitCode), and always restarted under Always or an unset
// policy (the API server defaults it to Always). A regular init container
// (init, not a sidecar) that succeeded is done whatever the policy; one
// that failed is retried unless the policy is Never. Container-level
// restart rules (ContainerRestartRules) are not read.
func ShouldRestart(policy v1.RestartPolicy, init bool, exitCode int32) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	if init {
		return exitCode != 0
	}
	return true
}

// Phase derives a pod's phase from the API statuses of its init and
// regular containers (matched to spec by name; a container with no status
// is unknown), by the kubelet's rule for the pod-level restartPolicy:
//
//   - Failed when a regular init container failed and the policy is
//     Never;
//   - Pending while a regular init container has not succeeded, a sidecar
//     has not started before any regular container did, or a container
//     (sidecar or regular) waits without having run;
//   - Running when every container started, none is unknown, and one
//     runs;
//   - when no container runs, every one has run and none is unknown:
//     Running if they will restart (policy Always, or OnFailure with a
//     failure), else Succeeded when every regular container exited 0 and
//     Failed otherwise;
//   - Pending in any other case.
//
// A sidecar that stopped does not count. A container waiting to restart
// after an exit (a waiting state with a last termination) counts as
// stopped, not as succeeded; a regular init container waiting so after a
// failure counts as failed.
//
// When stopped is true nothing runs or restarts any more (the pod's
// containers were stopped for good), and the phase is always terminal:
// Succeeded when every regular container exited 0 (and a regular init
// container failure under Never did not fail the pod), Failed otherwise.
// The kubelet leaves static pods out of that rule (kubernetes#116484);
// podkit does not.
func Phase(spec *v1.PodSpec, initStatuses, statuses []v1.ContainerStatus, stopped bool) v1.PodPhase {
	phase := phase(spec, initStatuses, statuses, stopped)
	if stopped && !IsTerminal(phase) {
		return v1.PodFailed
	}
	return phase
}

func phase(spec *v1.PodSpec, initStatuses, statuses []v1.ContainerStatus, stopped bool) v1.PodPhase {
	pendingInit, pendingSidecars, failedInit := 0, 0, 0
	var running, waiting, stoppedN, succeeded, unknown int
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		st, ok := statusOf(initStatuses, c.Name)
		if IsSidecar(c) {
			switch {
			case !ok:
				unknown++
			case st.State.Running != nil:
				running++
				if st.Started == nil || !*st.Started {
					pendingSidecars++
				}
			case st.State.Terminated != nil, st.State.Waiting != nil && st.LastTerminationState.Terminated != nil:
				// A stopped sidecar does not count.
			case st.State.Waiting != nil:
				waiting++
				pendingSidecars++
			default:
				unknown++
				pendingSidecars++
			}
			continue
		}
		switch {
		case !ok, st.State.Running != nil:
			pendingInit++
		case st.State.Terminated != nil:
			if st.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case st.State.Waiting != nil && st.LastTerminationState.Terminated != nil:
			if st.LastTerminationState.Terminated.ExitCode != 0 {
				failedInit++
			}
		default:
			pendingInit++
		}
	}
	for i := range spec.Containers {
		st, ok := statusOf(statuses, spec.Containers[i].Name)
		switch {
		case !ok:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stoppedN++
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil && st.LastTerminationState.Terminated != nil:
			stoppedN++
		case st.State.Waiting != nil:
			waiting++
		default:
			unknown++
		}
	}

	policy := spec.RestartPolicy
	switch {
	case failedInit > 0 && policy == v1.RestartPolicyNever:
		return v1.PodFailed
	case pendingInit > 0, pendingSidecars > 0 && !anyRegularRan(statuses), waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running > 0 || stoppedN == 0 || unknown > 0:
		return v1.PodPending
	case stopped:
		if stoppedN == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	case policy == v1.RestartPolicyAlways || policy == "":
		return v1.PodRunning
	case stoppedN == succeeded:
		return v1.PodSucceeded
	case policy == v1.RestartPolicyNever:
		return v1.PodFailed
	}
	return v1.PodRunning // OnFailure: the failed ones restart
}

// statusOf returns the status named name in statuses.
func statusOf(statuses []v1.ContainerStatus, name string) (*v1.ContainerStatus, bool) {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i], true
		}
	}
	return nil, false
}

// anyRegularRan reports whether a regular container's status shows it ran:
// it runs, exited, or waits after an exit.
func anyRegularRan(statuses []v1.ContainerStatus) bool {
	for _, st := range statuses {
		if st.State.Running != nil || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}
