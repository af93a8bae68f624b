package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/lifecycle/volume"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// The container runtimes the agent can drive.
const (
	// runtimeProcess runs pods as local processes (processruntime).
	runtimeProcess = "process"
	// runtimeCRI runs pods in a CRI runtime such as containerd
	// (examples/cri), over its unix socket.
	runtimeCRI = "cri"
)

// criResync is how often a pod running in a CRI runtime is synced again.
// The CRI syncer does not watch the runtime, so this is how soon a
// container that exited is restarted, or a finished pod is noticed.
const criResync = 2 * time.Second

// runtimeOptions choose the container runtime, from the command line.
type runtimeOptions struct {
	runtime     string
	criEndpoint string
}

// register adds --runtime and --cri-endpoint to fs.
func (o *runtimeOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.runtime, "runtime", runtimeProcess, "the container `runtime`: process (pods as local processes) or cri (a CRI runtime such as containerd, at --cri-endpoint; needs --manifests, and the pods' images on the node)")
	fs.StringVar(&o.criEndpoint, "cri-endpoint", "unix:///run/containerd/containerd.sock", "with --runtime cri: the CRI runtime's unix socket `endpoint`")
}

// validate checks the runtime flags against the others.
func (o runtimeOptions) validate(opts options) error {
	switch o.runtime {
	case runtimeProcess:
		return nil
	case runtimeCRI:
	default:
		return fmt.Errorf("--runtime %q: want %s or %s", o.runtime, runtimeProcess, runtimeCRI)
	}
	switch {
	case opts.demo():
		return errors.New("--runtime cri needs --manifests: the demo's pods are local commands, and a CRI runtime runs images")
	case opts.listen != "":
		return errors.New("--listen is served with --runtime process only")
	case !strings.HasPrefix(o.criEndpoint, "unix://") && !strings.HasPrefix(o.criEndpoint, "/"):
		return fmt.Errorf("--cri-endpoint %q: want unix:///path/to/socket", o.criEndpoint)
	}
	return nil
}

// criAgent is the agent over a CRI runtime: the static pods of a manifest
// directory flow through a lifecycle.Agent into the pod workers, whose
// hooks are a cri.Syncer. It prints each pod's lifecycle transitions and
// phase changes, and a summary at the end.
type criAgent struct {
	*console
	opts options
	log  logr.Logger

	syncer *cri.Syncer
	lc     *lifecycle.Agent[*cri.PodStatus]

	// mu guards statuses: each pod's last API status, from the syncer.
	mu       sync.Mutex
	statuses map[types.UID]criPodStatus
}

// criPodStatus is the last status the syncer reported for a pod.
type criPodStatus struct {
	name   string
	status v1.PodStatus
}

// criRuntime is the part of a CRI runtime the agent drives: *cri.Client
// over a socket, or a fake in tests.
type criRuntime interface {
	criapi.PodSandboxManager
	criapi.ContainerManager
}

// runCRI runs the agent over the CRI runtime at opts.criEndpoint until ctx
// ends (a signal) or, with --until-idle, every pod has finished; then it
// shuts the node down (every pod terminated with its grace period and
// removed) and prints the summary. It returns the exit code.
func runCRI(ctx context.Context, opts options, stdout, stderr io.Writer) int {
	if err := dialAndRunCRI(ctx, opts, stdout, newLogger(stderr, opts.verbosity)); err != nil {
		fmt.Fprintf(stderr, "nodeagent: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// dialAndRunCRI connects to the CRI runtime and runs the agent over it.
func dialAndRunCRI(ctx context.Context, opts options, out io.Writer, log logr.Logger) error {
	client, err := cri.Dial(opts.criEndpoint)
	if err != nil {
		return err
	}
	defer client.Close()
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	version, err := client.Version(vctx)
	cancel()
	if err != nil {
		return fmt.Errorf("the CRI runtime at %s does not answer: %w", opts.criEndpoint, err)
	}
	a, err := newCRIAgent(opts, out, log, client, client, version.GetRuntimeName())
	if err != nil {
		return err
	}
	a.say("connected to %s %s (CRI %s) at %s", version.GetRuntimeName(), version.GetRuntimeVersion(), version.GetRuntimeApiVersion(), opts.criEndpoint)
	return a.run(ctx)
}

// newCRIAgent assembles the agent over rt: the syncer, the lifecycle with
// the per-pod features (built once by the assembly, as for the process
// runtime: probes and hooks exec through the CRI, secrets and config maps
// from --objects, volumes in the state directory), the manifest source
// and the printer of transitions. It starts nothing.
func newCRIAgent(opts options, out io.Writer, log logr.Logger, rt criRuntime, images cri.ImageStatusReader, runtimeName string) (*criAgent, error) {
	a := &criAgent{console: newConsole(out), opts: opts, log: log, statuses: map[types.UID]criPodStatus{}}
	recorder := event.RecorderFunc(a.onEvent)
	var err error
	a.syncer, err = cri.New(rt, rt, cri.Options{
		Images:         images,
		LogDirectory:   filepath.Join(opts.stateDir, "cri-logs"),
		RuntimeName:    runtimeName,
		RestartBackOff: opts.restartBackOff,
		OnStatus:       a.onStatus,
		Recorder:       recorder,
		Logger:         log,
	})
	if err != nil {
		return nil, err
	}
	a.lc, err = lifecycle.NewAgent(a.syncer, lifecycle.AgentOptions[*cri.PodStatus]{
		Workers:  podworker.Options[*cri.PodStatus]{Status: a.syncer, ResyncInterval: criResync, BackOff: time.Second},
		SyncLoop: lifecycle.SyncLoopOptions{RuntimePods: a.syncer},
		Recorder: recorder,
		Logger:   log,
		Features: &lifecycle.PodFeatureOptions{
			Exec:       cri.NewExecRunner(rt),
			Objects:    newFileObjects(opts.objectsDir()),
			VolumeRoot: filepath.Join(opts.stateDir, "cri-volumes"),
			Volumes:    volume.Options{RefreshInterval: opts.volumeRefreshInterval, Evict: a.evictForLocalStorage},
		},
	})
	if err != nil {
		return nil, err
	}
	a.syncer.UsePodFeatures(a.lc.Features())
	manifests, err := podconfig.NewManifestSource(opts.manifests, podconfig.ManifestOptions{
		NodeName: opts.nodeName,
		Interval: opts.manifestInterval,
		Logger:   log.WithName("manifests"),
		Recorder: a.lc.Recorder(),
	})
	if err != nil {
		return nil, err
	}
	if err := a.lc.AddSource(opts.source(manifests)); err != nil {
		return nil, err
	}
	return a, a.lc.Add("transitions", newTransitionPrinter(a.console, a.lc.Workers()))
}

// run runs the agent until ctx ends or, with --until-idle, every pod has
// finished, then shuts the node down and prints the summary.
func (a *criAgent) run(ctx context.Context) error {
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	runDone := make(chan error, 1)
	go func() { runDone <- a.lc.Run(runCtx) }()

	var errs []error
	if a.opts.untilIdle {
		a.say("running the pods of %s until they have all finished", a.opts.manifests)
		if err := a.poll(ctx, a.idle); err != nil {
			a.say("interrupted")
		}
	} else {
		a.say("running the pods of %s until SIGINT or SIGTERM", a.opts.manifests)
		<-ctx.Done()
	}

	a.say("shutting down the node: every pod is terminated with its grace period (budget %v)", a.opts.shutdownGrace)
	errs = append(errs, shutdownNode(a.lc.NodeShutdown(), a.lc.SyncLoop(), a.opts.shutdownGrace)...)
	cleanCtx, cancelClean := context.WithTimeout(context.Background(), 10*time.Second)
	if err := a.poll(cleanCtx, a.cleanedUp); err != nil {
		pods, _ := a.syncer.ListRuntimePods(context.Background())
		errs = append(errs, fmt.Errorf("pods were not all removed from the runtime within 10s: %v", pods))
	}
	cancelClean()
	stopRun()
	if err := <-runDone; err != nil {
		errs = append(errs, err)
	}
	a.printSummary()
	return errors.Join(errs...)
}

// transitionPrinter prints each pod worker transition as a line of the
// console. As a lifecycle.Runnable it prints until the agent stops, and
// then the transitions still queued.
type transitionPrinter struct{ q *transitionQueue }

// newTransitionPrinter subscribes to the workers' transitions, so none is
// missed before Run reads them.
func newTransitionPrinter[T any](c *console, workers *podworker.PodWorkers[T]) transitionPrinter {
	return transitionPrinter{q: newTransitionQueue(workers, 1024, func(tr podworker.Transition) {
		c.lineAt(tr.Time, tr.FullName, tr.From.String()+" → "+tr.To.String())
	})}
}

func (p transitionPrinter) Run(ctx context.Context) error {
	p.q.drain(ctx)
	return nil
}

// onStatus records the status the syncer derived for a pod and prints its
// phase when it changed.
func (a *criAgent) onStatus(pod *v1.Pod, status v1.PodStatus) {
	a.mu.Lock()
	prev, seen := a.statuses[pod.UID]
	a.statuses[pod.UID] = criPodStatus{name: mirror.PodFullName(pod), status: status}
	a.mu.Unlock()
	if !seen || prev.status.Phase != status.Phase {
		msg := "phase " + string(status.Phase)
		if status.Reason != "" {
			msg += " (" + status.Reason + ")"
		}
		if status.PodIP != "" {
			msg += ", IP " + status.PodIP
		}
		a.lineAt(time.Now(), mirror.PodFullName(pod), msg)
	}
}

// onEvent prints the events the lifecycle records.
func (a *criAgent) onEvent(_ runtime.Object, eventType, reason, messageFmt string, args ...any) {
	a.say("event %s %s: %s", eventType, reason, fmt.Sprintf(messageFmt, args...))
}

// idle reports whether the manifests were read, every desired pod has
// finished (its containers stopped for good), and the runtime holds no pod
// the manifests do not want.
func (a *criAgent) idle() bool {
	if !a.lc.SyncLoop().SourcesReady() {
		return false
	}
	workers, store := a.lc.Workers(), a.lc.Store()
	for _, info := range workers.Pods() {
		if info.Stage < podworker.StageTerminated {
			return false
		}
	}
	for _, p := range store.GetPods() {
		if info, ok := workers.Pod(p.UID); !ok || info.Stage < podworker.StageTerminated {
			return false
		}
	}
	pods, err := a.syncer.ListRuntimePods(context.Background())
	if err != nil {
		return false
	}
	for _, rp := range pods {
		if _, ok := store.GetPodByUID(rp.UID); !ok {
			return false
		}
	}
	return true
}

// cleanedUp reports whether every worker finished and the runtime holds
// no pod of the agent.
func (a *criAgent) cleanedUp() bool {
	for _, info := range a.lc.Workers().Pods() {
		if !info.Finished && !(info.RuntimeOnly && info.Stage >= podworker.StageTerminated) {
			return false
		}
	}
	pods, err := a.syncer.ListRuntimePods(context.Background())
	return err == nil && len(pods) == 0
}

// poll checks cond every 100ms until it holds or ctx ends. The runtime is
// another process: its state can only be read, not waited on.
func (a *criAgent) poll(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// evictForLocalStorage is the volume manager's Options.Evict (see
// evictForLocalStorage in eviction.go).
func (a *criAgent) evictForLocalStorage(uid types.UID, message string) {
	if name, err := evictForLocalStorage(a.lc.Workers(), uid, message); err != nil {
		a.log.Error(err, "Couldn't evict a pod over its emptyDir sizeLimit", "podUID", uid)
	} else if name != "" {
		a.say("evicting %s: %s", name, message)
	}
}

// say prints a line about the agent itself.
func (a *criAgent) say(format string, args ...any) {
	a.lineAt(time.Now(), "", fmt.Sprintf(format, args...))
}

// printSummary prints each pod's last status: phase and how each container
// ended.
func (a *criAgent) printSummary() {
	a.mu.Lock()
	pods := make([]criPodStatus, 0, len(a.statuses))
	for _, s := range a.statuses {
		pods = append(pods, s)
	}
	a.mu.Unlock()
	slices.SortFunc(pods, func(x, y criPodStatus) int { return strings.Compare(x.name, y.name) })
	a.say("summary: %d pod(s)", len(pods))
	for _, p := range pods {
		var parts []string
		for _, cs := range append(slices.Clone(p.status.InitContainerStatuses), p.status.ContainerStatuses...) {
			switch {
			case cs.State.Terminated != nil:
				parts = append(parts, fmt.Sprintf("%s exited %d (%d restarts)", cs.Name, cs.State.Terminated.ExitCode, cs.RestartCount))
			case cs.State.Running != nil:
				parts = append(parts, fmt.Sprintf("%s running (%d restarts)", cs.Name, cs.RestartCount))
			case cs.State.Waiting != nil:
				parts = append(parts, fmt.Sprintf("%s waiting: %s", cs.Name, cs.State.Waiting.Reason))
			}
		}
		a.lineAt(time.Now(), p.name, fmt.Sprintf("%s; %s", p.status.Phase, strings.Join(parts, ", ")))
	}
}
