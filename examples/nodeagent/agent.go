package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podmanager"
	"github.com/podkit/podkit/podworker"
)

// options are the agent's settings, from the command line.
type options struct {
	manifests string
	stateDir  string
	nodeName  string
	listen    string
	// listenNonLoopback allows --listen on an address other than loopback.
	listenNonLoopback bool
	untilIdle         bool
	shutdownGrace     time.Duration
	restartBackOff    time.Duration
	manifestInterval  time.Duration
	verbosity         int
	// cgroups is the process runtime's containment: auto, off or required.
	cgroups string
	// demoTimeout bounds the demo script; past it the demo has stalled.
	demoTimeout time.Duration
	// runtimeOptions choose the container runtime (runtime_cri.go).
	runtimeOptions
	// logCapOptions cap the containers' logs (logcap.go).
	logCapOptions
}

// demo reports whether the agent plays the embedded demo (no --manifests).
func (o options) demo() bool { return o.manifests == "" }

// nodeAllocatable is what the demo node offers to pods.
var nodeAllocatable = v1.ResourceList{
	v1.ResourceCPU:    resource.MustParse("4"),
	v1.ResourceMemory: resource.MustParse("8Gi"),
	v1.ResourcePods:   resource.MustParse("110"),
}

// agent is the node agent: config sources feed a lifecycle.Handler, which
// drives the pod workers, which call the process runtime.
type agent struct {
	console
	opts options
	log  logr.Logger

	rt          *processruntime.Runtime
	workers     *podworker.PodWorkers[processruntime.PodStatus]
	store       *podmanager.Manager
	handler     *lifecycle.Handler
	config      *podconfig.Config
	api         *fakeAPIServer
	manifests   *podconfig.ManifestSource
	manifestDir string
	listener    net.Listener
	// httpSlots holds a value per pod request being served (at most
	// httpMaxInFlight); httpTimeouts are the server's.
	httpSlots    chan struct{}
	httpTimeouts httpTimeouts

	// mu guards the fields below.
	mu   sync.Mutex
	pods map[types.UID]*podRecord
	// podsPeak is the most records pods held since it was last rebuilt.
	podsPeak int
	// departed are the summary lines of the latest pods whose records were
	// pruned (at most maxDeparted, oldest first); departedDropped counts
	// the older ones.
	departed        []departedPod
	departedDropped int
	// changed is closed and replaced whenever a record changes.
	changed      chan struct{}
	shuttingDown bool
	// events are runtime events waiting for the event loop; eventWake has
	// a value when there are some.
	events    []processruntime.Event
	eventWake chan struct{}
}

// newAgent builds the agent: it opens the runtime (adopting what a previous
// run left in the state directory) and wires the engine, the handler and
// the config sources. It starts nothing but the HTTP listener's socket.
func newAgent(opts options, out io.Writer, log logr.Logger) (*agent, error) {
	a := &agent{
		console:   newConsole(out),
		opts:      opts,
		log:       log,
		pods:      map[types.UID]*podRecord{},
		changed:   make(chan struct{}),
		eventWake: make(chan struct{}, 1),

		httpSlots:    make(chan struct{}, httpMaxInFlight),
		httpTimeouts: defaultHTTPTimeouts,
	}
	if err := os.MkdirAll(opts.stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	mode, err := cgroupMode(opts.cgroups)
	if err != nil {
		return nil, err
	}
	rt, err := processruntime.Open(processruntime.Options{
		StateDir: filepath.Join(opts.stateDir, "runtime"),
		Cgroups:  mode,
		BackOff:  opts.restartBackOff,
		Logger:   log.WithName("runtime"),
		OnEvent:  a.onRuntimeEvent,

		ContainerLogMaxSize:  opts.containerLogMaxSize,
		ContainerLogMaxFiles: opts.containerLogMaxFiles,
	})
	if err != nil {
		return nil, err
	}
	a.rt = rt
	fail := func(err error) (*agent, error) {
		rt.Close()
		return nil, err
	}

	a.manifestDir = opts.manifests
	if opts.demo() {
		if err := a.preflightDemo(); err != nil {
			return fail(err)
		}
		a.manifestDir = filepath.Join(opts.stateDir, "demo-manifests")
		if err := writeDemoManifests(a.manifestDir); err != nil {
			return fail(err)
		}
	}

	a.workers, err = podworker.New[processruntime.PodStatus](rt, podworker.Options[processruntime.PodStatus]{
		Status:  rt,
		BackOff: time.Second,
		Logger:  log.WithName("podworker"),
	})
	if err != nil {
		return fail(err)
	}
	a.store = podmanager.New()
	if a.api, err = newFakeAPIServer(opts.nodeName, a.notify, a.say); err != nil {
		return fail(err)
	}
	a.config, err = podconfig.New(podconfig.Options{Recorder: lifecycle.RecorderFunc(a.onEvent), Logger: log.WithName("config")})
	if err != nil {
		return fail(err)
	}
	fit, err := admission.NewResourceFitHandler(func() v1.ResourceList { return nodeAllocatable })
	if err != nil {
		return fail(err)
	}
	maxPods, err := admission.NewMaxPodsHandler(int(nodeAllocatable.Pods().Value()))
	if err != nil {
		return fail(err)
	}
	a.handler, err = lifecycle.NewHandler(a.workers, a.store, lifecycle.Options{
		AdmitHandlers:        []admission.Handler{rt, fit, maxPods},
		OnReject:             a.onReject,
		MirrorClient:         a.api,
		RuntimePods:          lifecycle.RuntimePodListerFunc(a.listRuntimePods),
		Sources:              []string{mirror.ApiserverSource, mirror.FileSource},
		HousekeepingInterval: time.Second,
		Recorder:             lifecycle.RecorderFunc(a.onEvent),
		Logger:               log.WithName("lifecycle"),
	})
	if err != nil {
		return fail(err)
	}
	a.manifests, err = podconfig.NewManifestSource(a.manifestDir, podconfig.ManifestOptions{
		NodeName: opts.nodeName,
		Interval: opts.manifestInterval,
		Logger:   log.WithName("manifests"),
		Recorder: lifecycle.RecorderFunc(a.onEvent),
	})
	if err != nil {
		return fail(err)
	}
	if opts.listen != "" {
		if a.listener, err = net.Listen("tcp", opts.listen); err != nil {
			return fail(fmt.Errorf("--listen %s: %w", opts.listen, err))
		}
		if err := checkListenAddress(a.listener.Addr(), opts.listenNonLoopback); err != nil {
			a.listener.Close()
			return fail(fmt.Errorf("--listen %s: %w", opts.listen, err))
		}
	}
	return a, nil
}

// cgroupMode parses --cgroups ("" is the default, auto).
func cgroupMode(s string) (processruntime.CgroupMode, error) {
	if s == "" {
		return processruntime.CgroupsAuto, nil
	}
	for _, m := range []processruntime.CgroupMode{processruntime.CgroupsAuto, processruntime.CgroupsOff, processruntime.CgroupsRequired} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("--cgroups %q: want auto, off or required", s)
}

// listRuntimePods is housekeeping's RuntimePodLister. Housekeeping calls it
// once per pass, after SyncKnownPods and inside the sync loop's critical
// section (so config cannot change meanwhile), which makes it the agent's
// per-housekeeping hook: it first removes the tombstones (logs and final
// container states) of pods config no longer has and the records of pods
// known nowhere any more, then lists the runtime's pods.
func (a *agent) listRuntimePods(context.Context) ([]podworker.RuntimePod, error) {
	a.pruneTombstones()
	a.pruneRecords()
	return a.rt.RuntimePods(), nil
}

// pruneTombstones removes the tombstones of the pods that are no longer in
// the store, once every config source has delivered its pods: before
// that, a pod missing from the store may just not have arrived yet, and
// dropping its tombstone would let a pod that already finished run again.
func (a *agent) pruneTombstones() {
	if !a.handler.SourcesReady() {
		return
	}
	if _, err := a.rt.PruneTombstones(a.inStore); err != nil {
		a.log.Error(err, "Removing the logs of pods config no longer has failed; the next housekeeping retries")
	}
}

// run runs the agent until the demo ends, the node is idle (--until-idle)
// or ctx ends (a signal), then shuts down cleanly: every pod is terminated
// with its grace period, the sync loop and the workers stop, and the
// summary is printed. It returns an error when the agent failed, when the
// shutdown left pods running, or when processes of its pods survived.
func (a *agent) run(ctx context.Context) error {
	defer a.rt.Close()

	transitions := make(chan podworker.Transition, 4096)
	sub := a.workers.Subscribe(transitions)
	printerDone := make(chan struct{})
	go func() {
		defer close(printerDone)
		for tr := range transitions {
			a.onTransition(tr)
		}
	}()
	eventsStop, eventsDone := make(chan struct{}), make(chan struct{})
	go a.eventLoop(eventsStop, eventsDone)

	mainCtx, cancelMain := context.WithCancelCause(ctx)
	defer cancelMain(nil)
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	runDone := make(chan error, 1)
	go func() {
		err := a.handler.Run(runCtx, a.config.Updates())
		runDone <- err
		cancelMain(fmt.Errorf("the sync loop stopped: %v", err))
	}()

	srcCtx, stopSources := context.WithCancel(context.Background())
	defer stopSources()
	var sources sync.WaitGroup
	for _, src := range []func(context.Context, podconfig.PodSink) error{a.api.Run, a.manifests.Run} {
		sources.Add(1)
		go func() {
			defer sources.Done()
			if err := src(srcCtx, a.config); err != nil {
				cancelMain(fmt.Errorf("a config source failed: %w", err))
			}
		}()
	}

	var srv *http.Server
	srvDone := make(chan struct{})
	if a.listener != nil {
		srv = a.newHTTPServer()
		go func() {
			defer close(srvDone)
			if err := srv.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error(err, "The HTTP server stopped")
			}
		}()
		a.say("serving /pods, /pods/{uid}, /pods/{uid}/logs/{container} and /healthz on http://%s", a.listener.Addr())
	}

	a.say("containment: %s", a.rt.Containment())
	var errs []error
	var mainErr error
	switch {
	case a.opts.demo():
		a.say("playing the demo (node %s, state in %s)", a.opts.nodeName, a.opts.stateDir)
		mainErr = a.playDemo(mainCtx)
	case a.opts.untilIdle:
		a.say("running the pods of %s until they have all finished", a.manifestDir)
		mainErr = a.waitUntil(mainCtx, a.idle)
	default:
		a.say("running the pods of %s until SIGINT or SIGTERM", a.manifestDir)
		<-mainCtx.Done()
	}
	if cause := context.Cause(mainCtx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		errs = append(errs, cause)
	} else if ctx.Err() != nil {
		a.say("interrupted")
	} else if mainErr != nil {
		errs = append(errs, mainErr)
	}

	// Clean shutdown.
	a.mu.Lock()
	a.shuttingDown = true
	a.mu.Unlock()
	a.say("shutting down the node: every pod is terminated with its grace period (budget %v)", a.opts.shutdownGrace)
	errs = append(errs, shutdownNode(a.handler, a.opts.shutdownGrace)...)
	if err := a.waitCleanedUp(5 * time.Second); err != nil {
		errs = append(errs, err)
	}
	// Pods cleaned up after that pass leave their logs behind only while
	// config still has them.
	a.pruneTombstones()
	stopSources()
	sources.Wait()
	close(eventsStop)
	<-eventsDone
	stopRun()
	if err := <-runDone; err != nil {
		errs = append(errs, err)
	}
	sub.Close()
	close(transitions)
	<-printerDone
	if dropped := sub.Dropped(); dropped > 0 {
		a.say("warning: %d transitions were not printed (the output fell behind)", dropped)
	}
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		<-srvDone
	}
	if err := a.checkNoProcessLeft(); err != nil {
		errs = append(errs, err)
	}
	a.printSummary()
	return errors.Join(errs...)
}

// waitCleanedUp waits, up to limit, for every pod worker to have finished
// its cleanup and for the runtime to hold no pod any more but tombstones
// (so every pod's scratch directory is removed before the agent exits; the
// logs and final states of pods config still has are kept, for the next
// run to know which pods already finished).
func (a *agent) waitCleanedUp(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	err := a.waitUntil(ctx, func() bool {
		for _, info := range a.workers.Pods() {
			if !info.Finished && !(info.RuntimeOnly && info.Stage >= podworker.StageTerminated) {
				return false
			}
		}
		return len(a.rt.RuntimePods()) == 0
	})
	if err != nil {
		return fmt.Errorf("pods were not all cleaned up within %v: %d workers, runtime pods %v", limit, len(a.workers.Pods()), a.rt.RuntimePods())
	}
	return nil
}

// checkNoProcessLeft looks in the process table for processes of the
// agent's pods, the last line of defence: the runtime stops every process
// of a pod it stops, so any found is a bug (or a pod the shutdown could
// not stop). It kills them and returns an error naming them.
func (a *agent) checkNoProcessLeft() error {
	left, err := a.rt.Processes()
	if err != nil {
		return fmt.Errorf("checking for processes left behind: %w", err)
	}
	if len(left) > 0 {
		killed := processruntime.KillProcesses(left)
		return fmt.Errorf("%d processes of the agent's pods still ran after the shutdown, first pid %d (pod %s, container %s); killed %d of them", len(left), left[0].PID, left[0].PodUID, left[0].Container, killed)
	}
	return nil
}

// idle reports whether the sources have spoken, every pod has finished (or
// was rejected), and the runtime holds no pod config does not want (a
// leftover of a previous run that housekeeping has yet to kill).
func (a *agent) idle() bool {
	if !a.handler.SourcesReady() {
		return false
	}
	for _, rp := range a.rt.RuntimePods() {
		if !a.inStore(rp.UID) {
			return false
		}
	}
	for _, info := range a.workers.Pods() {
		if info.Stage < podworker.StageTerminated {
			return false
		}
	}
	for _, p := range a.store.GetPods() {
		a.mu.Lock()
		rec := a.pods[p.UID]
		rejected := rec != nil && rec.rejected != nil
		a.mu.Unlock()
		if info, ok := a.workers.Pod(p.UID); !rejected && (!ok || info.Stage < podworker.StageTerminated) {
			return false
		}
	}
	return true
}

// waitUntil blocks until cond holds or ctx ends (returning ctx's cause).
// cond is checked after every change of the agent's records, and every
// 200ms for what no record change signals (the sources becoming ready).
func (a *agent) waitUntil(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		a.mu.Lock()
		ch := a.changed
		a.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// notify wakes waitUntil.
func (a *agent) notify() {
	a.mu.Lock()
	a.notifyLocked()
	a.mu.Unlock()
}

func (a *agent) notifyLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// onRuntimeEvent records the runtime's view of the pod at once (so it is
// there before the engine's next transition) and queues the event for the
// event loop. It never blocks.
func (a *agent) onRuntimeEvent(ev processruntime.Event) {
	a.mu.Lock()
	rec := a.recordLocked(ev.UID)
	rec.runtime, rec.hasRuntime = ev.Status, true
	if rec.name == "" {
		rec.name = ev.Namespace + "/" + ev.Name
	}
	a.events = append(a.events, ev)
	a.notifyLocked()
	a.mu.Unlock()
	select {
	case a.eventWake <- struct{}{}:
	default:
	}
}

// eventLoop prints container events and, like the kubelet's PLEG, syncs a
// pod again when one of its containers exited, so restarts and completion
// are acted on at once rather than at the next resync. After stop it
// prints what is queued and returns.
func (a *agent) eventLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		stopping := false
		select {
		case <-a.eventWake:
		case <-stop:
			stopping = true
		}
		a.mu.Lock()
		evs := a.events
		a.events = nil
		a.mu.Unlock()
		for _, ev := range evs {
			a.printEvent(ev)
			if ev.Type == processruntime.ContainerExited && !stopping {
				a.workers.Resync(ev.UID)
			}
		}
		if stopping {
			return
		}
	}
}

// onReject records and prints a pod admission rejected.
func (a *agent) onReject(_ context.Context, pod *v1.Pod, status v1.PodStatus) {
	a.mu.Lock()
	rec := a.recordLocked(pod.UID)
	rec.setPodLocked(pod)
	rec.rejected = &status
	a.notifyLocked()
	a.mu.Unlock()
	a.line(rec.name, fmt.Sprintf("%-36s %s: %s", "absent → rejected", status.Reason, status.Message))
}

// onEvent prints the events the lifecycle package records (an invalid
// manifest, a mirror pod failure); admission rejections are printed by
// onReject.
func (a *agent) onEvent(_ runtime.Object, eventType, reason, messageFmt string, args ...any) {
	if a.isRejection(reason) {
		return
	}
	a.say("event %s %s: %s", eventType, reason, fmt.Sprintf(messageFmt, args...))
}

func (a *agent) isRejection(reason string) bool {
	switch reason {
	case admission.ReasonOutOfCPU, admission.ReasonOutOfMemory, admission.ReasonOutOfPods, lifecycle.ReasonNodeShutdown, "UnsupportedPod", admission.ReasonUnexpectedAdmissionError:
		return true
	}
	return false
}
