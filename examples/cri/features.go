package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/containerhook"
	"github.com/podkit/podkit/lifecycle/deadline"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/probe"
	"github.com/podkit/podkit/lifecycle/volume"
)

// The per-pod primitives of lifecycle/ the Syncer calls, each declared as
// wide as the syncer uses it. The lifecycle packages' own types implement
// them (the compile-time checks below); an agent gives the same values to
// the process runtime, so that both runtimes agree.

// EnvBuilder builds a container's environment, command and subPaths as the
// kubelet does: lifecycle/podenv's *Builder. The syncer calls it from
// SyncPod, for each container it is about to create, concurrently for
// different pods.
type EnvBuilder interface {
	Build(ctx context.Context, pod *v1.Pod, container *v1.Container, in podenv.Inputs) ([]podenv.EnvVar, error)
	ExpandCommandAndArgs(container *v1.Container, env []podenv.EnvVar) (command, args []string, err error)
	ExpandSubPathExpr(container *v1.Container, mount *v1.VolumeMount, env []podenv.EnvVar) (string, error)
}

// VolumeManager prepares the content of a pod's volumes in a directory per
// volume, which the syncer hands the runtime as CRI Mounts:
// lifecycle/volume's *Manager. SetUp is called in SyncPod before any
// container starts, HostPath and SubPath for each volume mount of a
// container being created, TearDown in SyncTerminatedPod.
type VolumeManager interface {
	SetUp(ctx context.Context, pod *v1.Pod) error
	HostPath(uid types.UID, volumeName string) (string, error)
	SubPath(uid types.UID, volumeName, subPath string) (string, error)
	TearDown(uid types.UID) (bool, error)
}

// Prober runs the pods' liveness, readiness and startup probes:
// lifecycle/probe's *Manager. SyncPod gives it every API status it derives
// (UpdatePodStatus fills in Started, Ready and the conditions) and asks it,
// for each running container, whether to kill it (ShouldRestart);
// SyncTerminatedPod makes it forget the pod.
type Prober interface {
	UpdatePodStatus(pod *v1.Pod, status *v1.PodStatus) error
	ShouldRestart(pod *v1.Pod, container, id string) (probe.Restart, bool)
	RemovePod(uid types.UID)
}

// HookRunner runs containers' postStart and preStop hooks:
// lifecycle/containerhook's *Runner. PostStart is called right after a
// container started, PreStop right before a running container is stopped,
// on the goroutine that starts or stops it.
type HookRunner interface {
	PostStart(ctx context.Context, c containerhook.Container) error
	PreStop(ctx context.Context, c containerhook.Container, gracePeriod int64) (left int64, err error)
}

// DeadlineChecker enforces pods' activeDeadlineSeconds:
// lifecycle/deadline's *Manager. SyncPod and SyncTerminatingPod ask Check
// of every status they build; SyncTerminatedPod calls Forget.
type DeadlineChecker interface {
	Check(pod *v1.Pod, startTime *metav1.Time) (bool, error)
	Forget(uid types.UID)
}

// primitives are the per-pod primitives the syncer's hooks call at one
// time: those of Options (Env and Hooks completed by New), or those of
// an agent's assembly (UsePodFeatures). A nil field is a primitive the
// syncer lacks (never an interface holding a nil pointer).
type primitives struct {
	env      EnvBuilder
	volumes  VolumeManager
	probes   Prober
	hooks    HookRunner
	deadline DeadlineChecker
}

// UsePodFeatures makes the syncer's hooks use f, the per-pod features an
// agent's assembly built (lifecycle.Agent.Features, from
// lifecycle.PodFeatureOptions whose Exec is NewExecRunner over the same
// runtime, or this Syncer): its probes, hooks, deadline, environment
// builder and, when f has one, its volume manager, in place of every one
// of Options.Env, Volumes, Probes, Hooks and Deadline. The assembly runs
// their loops and tells them of forgotten pods, so the agent adds none.
// A pod that needs volumes when f has no volume manager (no VolumeRoot)
// is refused as without Options.Volumes (Unsupported). A nil f goes back
// to the primitives of Options.
//
// Call it once, after lifecycle.NewAgent and before the agent runs; the
// hooks read the features atomically (each hook reads them once), so it
// is safe for concurrent use with them all the same.
func (s *Syncer) UsePodFeatures(f *lifecycle.PodFeatures) {
	if f == nil {
		s.prims.Store(s.own)
		return
	}
	p := &primitives{env: f.Env, hooks: f.Hooks}
	// Only non-nil pointers become interfaces: a nil one would not read
	// as a primitive the syncer lacks.
	if f.Volumes != nil {
		p.volumes = f.Volumes
	}
	if f.Probes != nil {
		p.probes = f.Probes
	}
	if f.Deadline != nil {
		p.deadline = f.Deadline
	}
	if f.Env == nil {
		p.env = s.own.env
	}
	if f.Hooks == nil {
		p.hooks = s.own.hooks
	}
	s.prims.Store(p)
}

// features returns the primitives the hooks use now.
func (s *Syncer) features() *primitives { return s.prims.Load() }

var (
	_ EnvBuilder      = (*podenv.Builder)(nil)
	_ VolumeManager   = (*volume.Manager)(nil)
	_ Prober          = (*probe.Manager)(nil)
	_ HookRunner      = (*containerhook.Runner)(nil)
	_ DeadlineChecker = (*deadline.Manager)(nil)
)

// Unsupported returns an error wrapping ErrUnsupported that lists what pod
// needs and the syncer cannot do: a probe without a probe manager
// (Options.Probes or UsePodFeatures), or one that cannot run
// (probe.Validate), activeDeadlineSeconds without a deadline manager
// (Options.Deadline or UsePodFeatures), a volume other than hostPath
// without a volume manager (Options.Volumes, or UsePodFeatures of features
// built with a VolumeRoot), a volume type lifecycle/volume does not
// prepare, a hostPath type the syncer does not check, a volumeDevice, or a
// Bidirectional mount propagation in a container that is not privileged.
// It is nil when the syncer can run pod as it is written.
//
// SyncPod applies it to every pod before running anything: such a pod's
// containers wait with reason CreateContainerConfigError and the error's
// message (and a Warning Failed event), and SyncPod fails (the engine
// retries, so a pod whose spec is fixed, or an agent restarted with the
// feature, runs). An agent's admission may call it to refuse such pods up
// front instead. It is pure and safe for concurrent use.
func (s *Syncer) Unsupported(pod *v1.Pod) error {
	prim := s.features()
	if pod == nil {
		return nil
	}
	var why []string
	if prim.probes == nil {
		for _, c := range probedContainers(pod) {
			why = append(why, fmt.Sprintf("container %q has probes, and the syncer has no probe manager to run them (Options.Probes, UsePodFeatures)", c.Name))
		}
	} else if err := probe.Validate(pod); err != nil {
		// Such a probe would never pass: the API server refuses it, a
		// static pod's file may hold it.
		why = append(why, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if prim.deadline == nil && pod.Spec.ActiveDeadlineSeconds != nil {
		why = append(why, "the pod sets activeDeadlineSeconds, and the syncer has no deadline manager to enforce it (Options.Deadline, UsePodFeatures)")
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			if !knownHostPathType(v.HostPath.Type) {
				why = append(why, fmt.Sprintf("hostPath volume %q has type %q, which the syncer does not check", v.Name, *v.HostPath.Type))
			}
			continue
		}
		if prim.volumes == nil {
			why = append(why, fmt.Sprintf("volume %q needs its content prepared, and the syncer has no volume manager (Options.Volumes, UsePodFeatures with a VolumeRoot)", v.Name))
		}
	}
	if prim.volumes != nil {
		var u *volume.UnsupportedError
		if err := volume.Unsupported(pod); errors.As(err, &u) {
			if rest := u.Without(volume.TypeHostPath); rest != nil {
				why = append(why, rest.Error())
			}
		}
	}
	for _, c := range allContainers(pod) {
		if len(c.VolumeDevices) > 0 {
			why = append(why, fmt.Sprintf("container %q has volumeDevices (raw block volumes)", c.Name))
		}
		for _, m := range c.VolumeMounts {
			if m.MountPropagation != nil && *m.MountPropagation == v1.MountPropagationBidirectional && !privileged(c) {
				why = append(why, fmt.Sprintf("volume mount %q of container %q is Bidirectional, which needs a privileged container", m.Name, c.Name))
			}
		}
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: pod %s: %s", ErrUnsupported, podRef(pod), strings.Join(why, "; "))
}

// probedContainers are the containers of pod with a probe: regular ones and
// sidecars (the probe manager ignores probes elsewhere, and Validate
// reports them).
func probedContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for _, c := range allContainers(pod) {
		if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
			out = append(out, c)
		}
	}
	return out
}

// allContainers are the init containers and containers of pod, in order.
func allContainers(pod *v1.Pod) []*v1.Container {
	out := make([]*v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// containerSpec returns the init container or container of pod named
// name, or nil.
func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for _, c := range allContainers(pod) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func privileged(c *v1.Container) bool {
	return c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
}
