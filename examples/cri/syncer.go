package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/internal/podstatus"
	"github.com/podkit/podkit/lifecycle/containerhook"
	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/podworker"
)

var (
	// ErrImageNotPresent is wrapped by the error SyncPod returns when a
	// container's image is not on the node. The syncer never pulls images:
	// the message names the image, the container and the pod.
	ErrImageNotPresent = errors.New("cri: image not present")
	// ErrBackOff is wrapped by the error SyncPod returns while an exited
	// container waits out its restart back-off. The error also asks the
	// engine (podworker.RetryAfter) to sync the pod again when the wait is
	// over.
	ErrBackOff = errors.New("cri: back-off restarting failed container")
	// ErrUnsupported is wrapped by the error SyncPod returns for a pod that
	// uses a feature this syncer does not implement (the message says
	// which).
	ErrUnsupported = errors.New("cri: unsupported pod feature")
)

// ImageStatusReader is the one method of the CRI image service the syncer
// uses, to check that an image is present before creating a container
// from it. cri-api's ImageManagerService, its FakeImageService and Client
// all have it.
type ImageStatusReader interface {
	// ImageStatus returns the image's status; its Image is nil when the
	// image is not present.
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error)
}

// Options configure a Syncer. The zero value is valid: every field says
// what it defaults to.
type Options struct {
	// Images is asked whether a container's image is present before the
	// container is created; a missing one fails SyncPod with
	// ErrImageNotPresent. Defaults to nil: the runtime's CreateContainer is
	// left to fail (the error still names the image).
	Images ImageStatusReader
	// RuntimeHandler is passed to RunPodSandbox (a runtime class's
	// handler). Defaults to "": the runtime's default handler.
	RuntimeHandler string
	// LogDirectory, when set, is the directory under which each pod gets
	// a log directory (<namespace>_<name>_<uid>) holding one log file per
	// container instance (<container>/<attempt>.log, in the CRI log
	// format). SyncTerminatedPod removes the pod's directory. Defaults to
	// "": containers' output is not kept.
	LogDirectory string
	// NodeIPs are the node's addresses, primary first. They become the
	// API status's HostIPs, and the PodIPs of host-network pods. Defaults
	// to none.
	NodeIPs []string
	// RuntimeName is the scheme of the container IDs in the API status
	// ("<RuntimeName>://<id>"). Defaults to "cri".
	RuntimeName string
	// RestartBackOff is the wait before the second restart of a crashing
	// container; the first restart is immediate and each further wait
	// doubles, up to MaxRestartBackOff. Defaults to 10 seconds, as the
	// kubelet.
	RestartBackOff time.Duration
	// MaxRestartBackOff caps the restart back-off. Defaults to 5 minutes
	// (or RestartBackOff when that is larger), as the kubelet.
	MaxRestartBackOff time.Duration
	// KillTimeout bounds the escalation that follows a cancelled
	// SyncTerminatingPod: killing what still runs without grace. Defaults
	// to 10 seconds.
	KillTimeout time.Duration
	// OnStatus, when set, is given the pod's API status derived from the
	// runtime: at the start of every SyncPod, and once the pod's
	// containers are stopped (the final status, with the engine's
	// podStatusFn applied). It is called from the engine's worker
	// goroutines, concurrently for different pods, never for one pod at
	// once; it must not block for long. Defaults to nil.
	OnStatus func(pod *v1.Pod, status v1.PodStatus)
	// Clock is the syncer's source of time (restart back-off, status
	// timestamps). Defaults to the real clock.
	Clock clock.PassiveClock
	// Stats measures containers and sandboxes for PodStats (a Client, or
	// the runtime service that serves the syncer). Defaults to nil:
	// PodStats fails.
	Stats StatsLister

	// The per-pod primitives of lifecycle/, shared with the agent's other
	// runtime (features.go), for an embedder that builds them itself: an
	// agent whose assembly builds them (lifecycle.AgentOptions.Features)
	// leaves these unset and calls UsePodFeatures, which replaces all
	// five (SyncPod's Options.X below then means the assembly's X). A pod
	// that needs one the syncer was not given does not run: its
	// containers wait (see Unsupported).

	// Env builds each container's environment, command and args, and
	// expands subPathExpr: a *podenv.Builder over the agent's getter.
	// Defaults to a podenv.Builder with no getter (literal values, $(VAR)
	// expansion, fieldRef and resourceFieldRef work; a reference to a
	// secret or config map leaves the container waiting in
	// CreateContainerConfigError).
	Env EnvBuilder
	// Volumes prepares the content of the pods' volumes, which the syncer
	// mounts as CRI Mounts: a *volume.Manager. Defaults to nil: a pod with
	// a volume other than hostPath waits (Unsupported).
	Volumes VolumeManager
	// Probes runs liveness, readiness and startup probes: a
	// *probe.Manager whose Exec is this Syncer (or an ExecRunner over the
	// same runtime). Defaults to nil: a pod with a probe waits.
	Probes Prober
	// Hooks runs postStart and preStop hooks: a *containerhook.Runner.
	// Defaults to a containerhook.Runner executing through this syncer's
	// ExecSync, recording to Recorder (its exec calls are CRI calls that
	// end with their ctx, so none outlives the sync that made it).
	Hooks HookRunner
	// Deadline enforces activeDeadlineSeconds: a *deadline.Manager.
	// Defaults to nil: a pod with activeDeadlineSeconds waits.
	Deadline DeadlineChecker
	// Recorder receives the syncer's events (EventFailed, EventKilling,
	// EventBackOff), on the container. Defaults to event.Discard.
	Recorder event.Recorder
	// Logger receives what the syncer logs outside a sync (a panicking
	// Recorder); syncs log to their ctx's logger. Defaults to discarding.
	Logger logr.Logger
}

// Syncer runs pods through the CRI: it implements podworker.PodSyncer for
// *PodStatus, podworker.RuntimePodSyncer, podworker.StatusSource and
// podworker.StoppedChecker, and lists the pods it created (RuntimePods) for
// housekeeping. It depends only on the CRI's sandbox and container roles.
//
// All methods are safe for concurrent use; the engine calls the hooks of
// one pod one at a time and those of different pods concurrently. Create
// it with New.
type Syncer struct {
	sandboxes  criapi.PodSandboxManager
	containers criapi.ContainerManager
	opts       Options // completed by New
	backOff    *restartBackOff
	waiting    *waitingStates

	startsMu sync.Mutex
	// starts holds when each pod's status was first derived, for the
	// active deadline of a pod that has no sandbox yet; an entry goes
	// when the pod is forgotten.
	starts map[types.UID]metav1.Time

	// own are the primitives of Options; prims those the hooks use: own,
	// or an assembly's (UsePodFeatures).
	own   *primitives
	prims atomic.Pointer[primitives]
}

var (
	_ podworker.PodSyncer[*PodStatus] = (*Syncer)(nil)
	_ podworker.RuntimePodSyncer      = (*Syncer)(nil)
)

const (
	defaultRuntimeName       = "cri"
	defaultRestartBackOff    = 10 * time.Second
	defaultMaxRestartBackOff = 5 * time.Minute
	defaultKillTimeout       = 10 * time.Second
	// defaultGracePeriod is the kubelet's, for a pod that sets none.
	defaultGracePeriod = 30
)

// New returns a Syncer that runs pods with sandboxes and containers. Both
// are required (a CRI client such as Client serves both; so does cri-api's
// FakeRuntimeService). opts is copied. The error says what is invalid.
func New(sandboxes criapi.PodSandboxManager, containers criapi.ContainerManager, opts Options) (*Syncer, error) {
	switch {
	case sandboxes == nil:
		return nil, errors.New("cri: New needs a PodSandboxManager, got nil")
	case containers == nil:
		return nil, errors.New("cri: New needs a ContainerManager, got nil")
	case opts.RestartBackOff < 0:
		return nil, fmt.Errorf("cri: RestartBackOff is %v; want 0 (default) or more", opts.RestartBackOff)
	case opts.MaxRestartBackOff < 0:
		return nil, fmt.Errorf("cri: MaxRestartBackOff is %v; want 0 (default) or more", opts.MaxRestartBackOff)
	case opts.KillTimeout < 0:
		return nil, fmt.Errorf("cri: KillTimeout is %v; want 0 (default) or more", opts.KillTimeout)
	case opts.RestartBackOff != 0 && opts.MaxRestartBackOff != 0 && opts.MaxRestartBackOff < opts.RestartBackOff:
		return nil, fmt.Errorf("cri: MaxRestartBackOff %v is below RestartBackOff %v", opts.MaxRestartBackOff, opts.RestartBackOff)
	}
	if opts.RuntimeName == "" {
		opts.RuntimeName = defaultRuntimeName
	}
	if opts.RestartBackOff == 0 {
		opts.RestartBackOff = defaultRestartBackOff
	}
	if opts.MaxRestartBackOff == 0 {
		opts.MaxRestartBackOff = max(defaultMaxRestartBackOff, opts.RestartBackOff)
	}
	if opts.KillTimeout == 0 {
		opts.KillTimeout = defaultKillTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	opts.NodeIPs = append([]string(nil), opts.NodeIPs...)
	opts.Recorder = event.OrDiscard(opts.Recorder)
	s := &Syncer{
		sandboxes:  sandboxes,
		containers: containers,
		backOff:    newRestartBackOff(opts.RestartBackOff, opts.MaxRestartBackOff),
		waiting:    newWaitingStates(),
		starts:     make(map[types.UID]metav1.Time),
	}
	if opts.Env == nil {
		env, err := podenv.New(nil, podenv.Options{Recorder: opts.Recorder, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("cri: the default environment builder: %w", err)
		}
		opts.Env = env
	}
	if opts.Hooks == nil {
		opts.Hooks = containerhook.New(containerhook.Options{Exec: NewExecRunner(containers), Recorder: opts.Recorder, Logger: opts.Logger})
	}
	s.opts = opts
	s.own = &primitives{env: opts.Env, volumes: opts.Volumes, probes: opts.Probes, hooks: opts.Hooks, deadline: opts.Deadline}
	s.prims.Store(s.own)
	return s, nil
}

// SyncPod makes the runtime match pod:
//   - with no ready sandbox, it stops what is left of the pod's old
//     sandboxes and runs a new one (pod network or, for HostNetwork pods,
//     the node's) — except for a RestartPolicy Never pod whose containers
//     already ran, which is reported terminal instead;
//   - it runs the init containers one at a time, each to success, before
//     any regular container (sidecar init containers, restartPolicy
//     Always, are started and kept running instead);
//   - it creates and starts the regular containers that do not exist yet,
//     and restarts exited ones as the pod's restartPolicy says, spacing
//     restarts with an exponential back-off (ErrBackOff);
//   - it reports terminal, and starts nothing, once the pod's phase is
//     Succeeded or Failed, or once it is past its activeDeadlineSeconds
//     (Options.Deadline: the status reported is Failed, DeadlineExceeded);
//   - before anything runs, it refuses (Unsupported: the containers wait
//     in CreateContainerConfigError) a pod that needs a primitive the
//     syncer lacks, and has the pod's volumes prepared (Options.Volumes:
//     no container starts while one is not ready);
//   - it stops the running containers whose liveness or startup probe
//     failed (Options.Probes), preStop hook first, and starts them again
//     by their policy in the same sync;
//   - each container is created with the environment, command and mounts
//     built for it (Options.Env, Options.Volumes; one that cannot be built
//     waits in CreateContainerConfigError, the others go on), and its
//     postStart hook runs once it started (Options.Hooks; a failure kills
//     it).
//
// The status reported (Options.OnStatus) has gone through the probes
// (Started, Ready, conditions). Images must be present (ErrImageNotPresent); nothing is pulled. status
// is the snapshot the engine read; when nil it is read here. SyncPod does
// not wait for an init container to finish: the next sync (a resync, or
// an update) continues. Errors of several containers are joined; ctx ends
// the CRI calls in flight.
func (s *Syncer) SyncPod(ctx context.Context, updateType podworker.UpdateType, pod, mirrorPod *v1.Pod, status *PodStatus) (bool, error) {
	if pod == nil {
		return false, errors.New("cri: SyncPod needs a pod, got nil")
	}
	status, err := s.ensureStatus(ctx, pod.UID, status)
	if err != nil {
		return false, err
	}
	api, pastDeadline := s.derive(ctx, pod, status, false)
	s.report(pod, api)
	if pastDeadline || podstatus.IsTerminal(api.Phase) {
		return true, nil
	}
	if err := s.Unsupported(pod); err != nil {
		s.waitAll(pod, status, err.Error())
		return false, err
	}
	if err := s.setUpVolumes(ctx, pod); err != nil {
		return false, err
	}

	var sandboxID string
	var sandboxConfig *runtimeapi.PodSandboxConfig
	podIPs := s.podIPs(pod, status)
	if sb := status.ReadySandbox(); sb != nil {
		sandboxID = sb.GetId()
		sandboxConfig = s.sandboxConfig(pod, sb.GetMetadata().GetAttempt())
	} else {
		var attempt uint32
		if len(status.Sandboxes) > 0 {
			// The pod's sandbox died: release what is left of it first.
			if err := s.stopAll(ctx, pod, pod.UID, status, gracePeriodOf(pod)); err != nil {
				return false, err
			}
			attempt = status.Sandboxes[0].GetMetadata().GetAttempt() + 1
		}
		sandboxConfig = s.sandboxConfig(pod, attempt)
		if sandboxID, err = s.runSandbox(ctx, pod, sandboxConfig); err != nil {
			return false, err
		}
		if podIPs, err = s.sandboxIPs(ctx, pod, sandboxID); err != nil {
			return false, err
		}
	}
	killed, err := s.killUnhealthy(ctx, pod, status, sandboxID, podIPs)
	if err != nil {
		return false, err
	}
	if killed {
		// Restart what was killed now, by its policy: read what it left.
		if status, err = s.PodStatus(ctx, pod.UID, time.Time{}); err != nil {
			return false, err
		}
	}
	return false, s.syncContainers(ctx, pod, status, sandboxID, sandboxConfig, podIPs)
}

// SyncTerminatingPod stops every container of the pod, each with
// gracePeriod seconds as its stop timeout (in parallel; a running
// container's preStop hook runs first, within gracePeriod, and its stop
// gets what is left, at least containerhook.MinimumGracePeriodSeconds),
// then stops every sandbox of the pod, then checks with the runtime that
// no container of the pod runs and no sandbox is ready. It returns nil
// only then.
//
// A cancelled ctx escalates at once: whatever still runs is stopped with a
// zero timeout (killed) on a context of its own bounded by
// Options.KillTimeout, and the error returned wraps ctx.Err(). When
// Options.OnStatus is set it is given the pod's final status (through the
// probes, and Failed with DeadlineExceeded for a pod past its deadline),
// with podStatusFn applied; otherwise podStatusFn is not used.
func (s *Syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, status *PodStatus, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	if pod == nil {
		return errors.New("cri: SyncTerminatingPod needs a pod, got nil")
	}
	status, err := s.ensureStatus(ctx, pod.UID, status)
	if err != nil {
		return s.escalate(ctx, pod.UID, nil, err)
	}
	if err := s.stopAll(ctx, pod, pod.UID, status, max(gracePeriod, 0)); err != nil {
		return err
	}
	if s.opts.OnStatus != nil {
		final, err := s.PodStatus(ctx, pod.UID, time.Time{})
		if err != nil {
			return err
		}
		api, _ := s.derive(ctx, pod, final, true)
		if podStatusFn != nil {
			podStatusFn(&api)
		}
		s.report(pod, api)
	}
	return nil
}

// SyncTerminatedPod removes every container and sandbox of the pod (found
// afresh with ListContainers and ListPodSandbox; status is not used), the
// pod's log directory and its restart back-off, and has the primitives
// forget the pod (probes, deadline timer; its volumes are torn down when
// the engine says they may go, else by the volume manager later). It is
// idempotent: what is
// already gone is not an error. It fails, removing nothing, while a
// container of the pod runs or a sandbox is ready: the engine only calls it
// after SyncTerminatingPod succeeded.
func (s *Syncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, status *PodStatus) error {
	if pod == nil {
		return errors.New("cri: SyncTerminatedPod needs a pod, got nil")
	}
	if err := s.removeAll(ctx, pod.UID); err != nil {
		return err
	}
	return s.forget(ctx, pod.Namespace, pod.Name, pod.UID)
}

// forget drops what the syncer keeps of a removed pod (its log
// directory, its restart back-off, its waiting containers) and what the
// primitives keep of it: its probes, its deadline's timer, and its volumes
// when the engine says they may go (the volume manager's Run removes them
// otherwise, and retries a teardown that failed, which is only logged).
func (s *Syncer) forget(ctx context.Context, namespace, name string, uid types.UID) error {
	prim := s.features()
	if s.opts.LogDirectory != "" && name != "" {
		if err := os.RemoveAll(podLogDirectory(s.opts.LogDirectory, namespace, name, uid)); err != nil {
			return fmt.Errorf("cri: removing the log directory of pod %s/%s (%s): %w", namespace, name, uid, err)
		}
	}
	s.backOff.forget(uid)
	s.waiting.forget(uid)
	s.startsMu.Lock()
	delete(s.starts, uid)
	s.startsMu.Unlock()
	if prim.probes != nil {
		prim.probes.RemovePod(uid)
	}
	if prim.deadline != nil {
		prim.deadline.Forget(uid)
	}
	if prim.volumes != nil {
		if _, err := prim.volumes.TearDown(uid); err != nil {
			logr.FromContextOrDiscard(ctx).V(1).Info("Tearing down the pod's volumes failed; the volume manager retries", "err", err.Error())
		}
	}
	return nil
}

// SyncTerminatingRuntimePod stops a pod that only the runtime knows (an
// orphan found by RuntimePods), as SyncTerminatingPod does with a grace
// period of 1 second, and then removes its containers, sandboxes and log
// directory: the engine calls no SyncTerminatedPod for such a pod, so
// nothing else would.
// It returns nil only when nothing of the pod is left running.
func (s *Syncer) SyncTerminatingRuntimePod(ctx context.Context, pod podworker.RuntimePod) error {
	status, err := s.PodStatus(ctx, pod.UID, time.Time{})
	if err != nil {
		return s.escalate(ctx, pod.UID, nil, err)
	}
	if err := s.stopAll(ctx, nil, pod.UID, status, 1); err != nil {
		return err
	}
	if err := s.removeAll(ctx, pod.UID); err != nil {
		return err
	}
	return s.forget(ctx, pod.Namespace, pod.Name, pod.UID)
}

// ensureStatus returns status, or reads it when the engine gave none.
func (s *Syncer) ensureStatus(ctx context.Context, uid types.UID, status *PodStatus) (*PodStatus, error) {
	if status != nil && status.UID == uid {
		return status, nil
	}
	return s.PodStatus(ctx, uid, time.Time{})
}

// report hands api to Options.OnStatus, if set.
func (s *Syncer) report(pod *v1.Pod, api v1.PodStatus) {
	if s.opts.OnStatus != nil {
		s.opts.OnStatus(pod, api)
	}
}

// runSandbox runs the pod's sandbox with config.
func (s *Syncer) runSandbox(ctx context.Context, pod *v1.Pod, config *runtimeapi.PodSandboxConfig) (string, error) {
	if config.GetLogDirectory() != "" {
		if err := os.MkdirAll(config.GetLogDirectory(), 0o755); err != nil {
			return "", fmt.Errorf("cri: creating the log directory of pod %s: %w", podRef(pod), err)
		}
	}
	id, err := s.sandboxes.RunPodSandbox(ctx, config, s.opts.RuntimeHandler)
	if err != nil {
		return "", fmt.Errorf("cri: running the sandbox of pod %s (host network %t, attempt %d): %w",
			podRef(pod), pod.Spec.HostNetwork, config.GetMetadata().GetAttempt(), err)
	}
	logr.FromContextOrDiscard(ctx).V(4).Info("Ran pod sandbox", "sandboxID", id, "attempt", config.GetMetadata().GetAttempt())
	return id, nil
}

// podRef names a pod in messages: namespace/name (uid).
func podRef(pod *v1.Pod) string {
	return fmt.Sprintf("%s/%s (%s)", pod.Namespace, pod.Name, pod.UID)
}

// gracePeriodOf is the pod's termination grace period in seconds.
func gracePeriodOf(pod *v1.Pod) int64 {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g >= 0 {
		return *g
	}
	return defaultGracePeriod
}
