package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/containerhook"
	"github.com/podkit/podkit/lifecycle/deadline"
	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/probe"
	"github.com/podkit/podkit/lifecycle/volume"
)

// PodFeatureOptions make NewAgent build the kubelet's per-pod features
// once, for the agent's runtime to use (AgentOptions.Features): probes,
// container lifecycle hooks, the active deadline, containers'
// environments and, with a VolumeRoot, volumes. An agent supplies only
// what is its own: how to run a command in a container (Exec), how to
// read the secrets and config maps its pods reference (Objects), how to
// ask for service-account tokens (Tokens) and where volumes go
// (VolumeRoot). The window (the pod workers, by UID), RequestSync, the
// Recorder, the Clock and the Logger are the agent's, filled in by
// NewAgent where a part's own options leave them unset.
type PodFeatureOptions struct {
	// Exec runs exec probes and exec hooks in a container, by the
	// container ID the runtime reports: the runtime's. It is the default
	// of Probes.Exec and Hooks.Exec. Nil: exec probes are errors
	// (probe.Manager.UpdatePodStatus says so) and exec hooks fail.
	Exec probe.ExecRunner
	// Host is where httpGet, tcpSocket and grpc probes and httpGet hooks
	// that name no host connect: "127.0.0.1" for a runtime whose pods
	// share the node's network. It is the default of Probes.Host; the
	// runtime passes it to its hooks. Defaults to the pod's IP.
	Host string
	// Objects reads the secrets and config maps pods reference, for their
	// environments and volumes. Nil: every such reference fails (a
	// container waits in CreateContainerConfigError, a volume's setup
	// fails with FailedMount), saying why.
	Objects podenv.Objects
	// Tokens requests service-account tokens for projected volumes. It is
	// the default of Volumes.Tokens.
	Tokens volume.TokenRequester
	// VolumeRoot is the directory the volume manager owns alone
	// (volume.New's root). Empty: no volume manager is built, and
	// PodFeatures.Volumes is nil.
	VolumeRoot string

	// Probes, Hooks, Deadline, Env and Volumes configure each part; their
	// RequestSync defaults to Agent.RequestSync, their Recorder to the
	// agent's, their Clock to the agent's (where it has the methods the
	// part needs), their Logger to the agent's, named after the part.
	// Env.VolumeFiles defaults to the volume manager (fileKeyRef).
	Probes   probe.Options
	Hooks    containerhook.Options
	Deadline deadline.Options
	Env      podenv.Options
	Volumes  volume.Options
}

// PodFeatures are the per-pod features NewAgent built (Agent.Features),
// for the runtime's hooks to use: SyncPod reads the probes' results, runs
// hooks, checks the deadline, builds environments and sets volumes up;
// SyncTerminatingPod runs preStop hooks; SyncTerminatedPod forgets the
// pod. The loops among them (Probes, Deadline, Volumes, and the hooks'
// Wait) are run and stopped by Agent.Run, and told of forgotten pods by
// the sync loop, so a runtime only calls their per-pod methods. Every
// field is safe for concurrent use.
type PodFeatures struct {
	// Probes runs liveness, readiness and startup probes.
	Probes *probe.Manager
	// Hooks runs postStart and preStop hooks.
	Hooks *containerhook.Runner
	// Deadline enforces activeDeadlineSeconds.
	Deadline *deadline.Manager
	// Env builds containers' environments.
	Env *podenv.Builder
	// Volumes prepares the content of pods' volumes; nil without
	// PodFeatureOptions.VolumeRoot.
	Volumes *volume.Manager
}

// featureWindow is what the per-pod features ask the pod workers, by UID.
type featureWindow interface {
	probe.PodTermination
	volume.ContentRemovalChecker
}

// newPodFeatures builds the features of opts over the agent's window,
// RequestSync, recorder, clock and logger, and adds their loops to a.
func (a *Agent[T]) newPodFeatures(opts PodFeatureOptions, window featureWindow, recorder event.Recorder, clk clock.WithTicker, log logr.Logger) (*PodFeatures, error) {
	named := func(l logr.Logger, name string) logr.Logger {
		if l.GetSink() != nil {
			return l
		}
		return log.WithName(name)
	}
	recorderOr := func(r event.Recorder) event.Recorder {
		if r == nil {
			return recorder
		}
		return r
	}
	delayed, _ := clk.(clock.WithDelayedExecution)

	po := opts.Probes
	if po.Exec == nil {
		po.Exec = opts.Exec
	}
	if po.Host == "" {
		po.Host = opts.Host
	}
	if po.RequestSync == nil {
		po.RequestSync = a.RequestSync
	}
	po.Recorder, po.Logger = recorderOr(po.Recorder), named(po.Logger, "probe")
	if po.Clock == nil && delayed != nil {
		po.Clock = delayed
	}
	probes, err := probe.New(window, po)
	if err != nil {
		return nil, err
	}

	ho := opts.Hooks
	if ho.Exec == nil {
		ho.Exec = opts.Exec
	}
	ho.Recorder, ho.Logger = recorderOr(ho.Recorder), named(ho.Logger, "containerhook")
	if ho.Clock == nil && delayed != nil {
		ho.Clock = delayed
	}
	hooks := containerhook.New(ho)

	do := opts.Deadline
	if do.RequestSync == nil {
		do.RequestSync = a.RequestSync
	}
	do.Recorder, do.Logger = recorderOr(do.Recorder), named(do.Logger, "deadline")
	if do.Clock == nil {
		do.Clock = clk
	}
	dl, err := deadline.New(window, do)
	if err != nil {
		return nil, err
	}

	f := &PodFeatures{Probes: probes, Hooks: hooks, Deadline: dl}
	if opts.VolumeRoot != "" {
		vo := opts.Volumes
		if vo.Tokens == nil {
			vo.Tokens = opts.Tokens
		}
		if vo.RequestSync == nil {
			vo.RequestSync = a.RequestSync
		}
		vo.Recorder, vo.Logger = recorderOr(vo.Recorder), named(vo.Logger, "volume")
		if vo.Clock == nil {
			vo.Clock = clk
		}
		if f.Volumes, err = volume.New(opts.VolumeRoot, opts.Objects, window, vo); err != nil {
			return nil, err
		}
	}

	eo := opts.Env
	if eo.VolumeFiles == nil && f.Volumes != nil {
		eo.VolumeFiles = f.Volumes
	}
	eo.Recorder, eo.Logger = recorderOr(eo.Recorder), named(eo.Logger, "podenv")
	if f.Env, err = podenv.New(opts.Objects, eo); err != nil {
		return nil, err
	}
	return f, nil
}

// addFeatureLoops adds the loops of f to the agent: each stops after the
// sync loop and the pod workers, so no hook of theirs finds it gone.
func (a *Agent[T]) addFeatureLoops(f *PodFeatures) error {
	adds := []error{
		a.Add("probes", PodLoop{Runnable: f.Probes, PodObserver: PodObserverFuncs{PodForgottenFunc: f.Probes.RemovePod}}),
		a.Add("active deadline", PodLoop{Runnable: f.Deadline, PodObserver: PodObserverFuncs{PodForgottenFunc: f.Deadline.Forget}}),
		// The hooks keep no loop; what an abandoned exec hook left is
		// waited for once the pod workers have stopped.
		a.Add("container hooks", RunnableFunc(func(ctx context.Context) error {
			<-ctx.Done()
			f.Hooks.Wait()
			return nil
		})),
	}
	if f.Volumes != nil {
		adds = append(adds, a.Add("volumes", f.Volumes))
	}
	if err := errors.Join(adds...); err != nil {
		return fmt.Errorf("lifecycle: NewAgent: %w", err)
	}
	return nil
}

// Features returns the per-pod features NewAgent built from
// AgentOptions.Features, for the runtime's hooks; nil when the agent was
// built without them. Call it from any goroutine.
func (a *Agent[T]) Features() *PodFeatures { return a.features }
