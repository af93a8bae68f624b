package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/volume"
	"github.com/podkit/podkit/podmanager"
	"github.com/podkit/podkit/podworker"
)

// options are the agent's settings, from the command line.
type options struct {
	manifests string
	// objects is the directory of the secrets and config maps the pods
	// reference (objects.go); "" for objects/ beside the manifests.
	objects  string
	stateDir string
	nodeName string
	listen   string
	// listenNonLoopback allows --listen on an address other than loopback.
	listenNonLoopback bool
	untilIdle         bool
	shutdownGrace     time.Duration
	restartBackOff    time.Duration
	manifestInterval  time.Duration
	// volumeRefreshInterval is how often volumes follow their sources and
	// emptyDirs with a sizeLimit are measured (volume.Options.RefreshInterval).
	volumeRefreshInterval time.Duration
	verbosity             int
	// cgroups is the process runtime's containment: auto, off or required.
	cgroups string
	// imageConfig is the file of image configurations the process runtime
	// adds to its defaults (processruntime.LoadImageTable); "" for none.
	imageConfig string
	// demoTimeout bounds the demo script; past it the demo has stalled.
	demoTimeout time.Duration
	// runtimeOptions choose the container runtime (runtime_cri.go).
	runtimeOptions
	// logCapOptions cap the containers' logs (logcap.go).
	logCapOptions

	// wrapSource, when set (by tests), is applied to each config source
	// before the agent runs it.
	wrapSource func(podconfig.Source) podconfig.Source
}

// objectsDir is the directory the pods' secrets and config maps are read
// from: --objects, else objects/ beside --manifests (for the demo, one in
// the state directory, which holds none).
func (o options) objectsDir() string {
	switch {
	case o.objects != "":
		return o.objects
	case o.manifests != "":
		return filepath.Join(filepath.Dir(filepath.Clean(o.manifests)), "objects")
	}
	return filepath.Join(o.stateDir, "demo-objects")
}

// demo reports whether the agent plays the embedded demo (no --manifests).
func (o options) demo() bool { return o.manifests == "" }

// source is src as the agent runs it (see options.wrapSource).
func (o options) source(src podconfig.Source) podconfig.Source {
	if o.wrapSource != nil {
		return o.wrapSource(src)
	}
	return src
}

// nodeAllocatable is what the demo node offers to pods.
var nodeAllocatable = v1.ResourceList{
	v1.ResourceCPU:    resource.MustParse("4"),
	v1.ResourceMemory: resource.MustParse("8Gi"),
	v1.ResourcePods:   resource.MustParse("110"),
}

// agent is the node agent over the process runtime: a lifecycle.Agent
// (config sources, the sync loop, the pod workers) whose hooks are the
// runtime's, and the parts that show what happens: the pod records, the
// timeline printed as it goes, the HTTP endpoint. Each part is a type of
// its own; the agent builds them (newAgent) and runs them (run.go).
type agent struct {
	opts options
	log  logr.Logger
	*console

	rt      *processruntime.Runtime
	lc      *lifecycle.Agent[processruntime.PodStatus]
	workers *podworker.PodWorkers[processruntime.PodStatus]
	store   *podmanager.Manager
	api     *fakeAPIServer
	// manifestDir is the directory of static pods (the demo's, written
	// into the state directory, or --manifests).
	manifestDir string

	records  *podRecords
	timeline *timeline
	events   *runtimeEvents
	// server is the HTTP endpoint; nil without --listen.
	server *podServer
}

// newAgent builds the agent: it opens the runtime (adopting what a previous
// run left in the state directory) and assembles the lifecycle around it.
// It starts nothing but the HTTP listener's socket.
func newAgent(opts options, out io.Writer, log logr.Logger) (*agent, error) {
	a := &agent{opts: opts, log: log, console: newConsole(out), records: newPodRecords(), manifestDir: opts.manifests}
	if err := os.MkdirAll(opts.stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	mode, err := cgroupMode(opts.cgroups)
	if err != nil {
		return nil, err
	}
	a.events = newRuntimeEvents(a.records)
	var images processruntime.ImageConfigs
	if opts.imageConfig != "" {
		table, err := processruntime.LoadImageTable(opts.imageConfig)
		if err != nil {
			return nil, fmt.Errorf("--image-config: %w", err)
		}
		images = table
	}
	a.rt, err = processruntime.Open(processruntime.Options{
		ImageConfigs: images,
		StateDir:     filepath.Join(opts.stateDir, "runtime"),
		Cgroups:      mode,
		BackOff:      opts.restartBackOff,
		Logger:       log.WithName("runtime"),
		OnEvent:      a.events.add,

		ContainerLogMaxSize:  opts.containerLogMaxSize,
		ContainerLogMaxFiles: opts.containerLogMaxFiles,
	})
	if err != nil {
		return nil, err
	}
	if err := a.build(); err != nil {
		a.rt.Close()
		return nil, err
	}
	return a, nil
}

// build assembles the agent over its open runtime.
func (a *agent) build() error {
	opts := a.opts
	if opts.demo() {
		if err := preflightDemo(a.rt); err != nil {
			return err
		}
		a.manifestDir = filepath.Join(opts.stateDir, "demo-manifests")
		if err := writeDemoManifests(a.manifestDir); err != nil {
			return err
		}
	}
	var err error
	if a.api, err = newFakeAPIServer(opts.nodeName, a.records.notify, a.say); err != nil {
		return err
	}
	fit, err := admission.NewResourceFitHandler(func() v1.ResourceList { return nodeAllocatable })
	if err != nil {
		return err
	}
	maxPods, err := admission.NewMaxPodsHandler(int(nodeAllocatable.Pods().Value()))
	if err != nil {
		return err
	}
	allocatable := func() v1.ResourceList { return nodeAllocatable }
	a.lc, err = lifecycle.NewAgent(a.rt, lifecycle.AgentOptions[processruntime.PodStatus]{
		Workers: podworker.Options[processruntime.PodStatus]{Status: a.rt, BackOff: time.Second},
		SyncLoop: lifecycle.SyncLoopOptions{
			AdmitHandlers:        []admission.Handler{a.rt, fit, maxPods},
			OnReject:             a.onReject,
			MirrorClient:         a.api,
			RuntimePods:          lifecycle.RuntimePodListerFunc(a.listRuntimePods),
			HousekeepingInterval: time.Second,
		},
		Recorder: event.RecorderFunc(a.onEvent),
		Logger:   a.log,
		// Probes, hooks, the active deadline, environments and volumes,
		// wired once by the assembly: the agent gives the runtime (exec
		// probes and hooks), its files of secrets and config maps, and
		// where volumes go (inside the runtime's state directory, hidden
		// from pods). No API server: no service-account tokens.
		Features: &lifecycle.PodFeatureOptions{
			Exec:       a.rt,
			Objects:    newFileObjects(opts.objectsDir()),
			VolumeRoot: a.rt.VolumeRoot(),
			Env:        podenv.Options{NodeAllocatable: allocatable},
			Volumes: volume.Options{
				MapIDs: a.rt.MapIDs, NodeAllocatable: allocatable,
				RefreshInterval: opts.volumeRefreshInterval,
				Evict:           a.evictForLocalStorage,
			},
		},
	})
	if err != nil {
		return err
	}
	a.rt.UsePodFeatures(a.lc.Features())
	a.workers, a.store = a.lc.Workers(), a.lc.Store()
	a.events.requestSync = a.lc.RequestSync
	manifests, err := podconfig.NewManifestSource(a.manifestDir, podconfig.ManifestOptions{
		NodeName: opts.nodeName,
		Interval: opts.manifestInterval,
		Logger:   a.log.WithName("manifests"),
		Recorder: a.lc.Recorder(),
	})
	if err != nil {
		return err
	}
	a.timeline = newTimeline(a.console, a.records, a.workers)
	a.timeline.inStore, a.timeline.shuttingDown = a.inStore, a.lc.NodeShutdown().ShuttingDown
	a.timeline.hasMirror = func(fullName string) bool { _, ok := a.api.MirrorPod(fullName); return ok }
	a.events.print = a.timeline.printEvent
	for _, err := range []error{
		a.lc.AddSource(opts.source(a.api)),
		a.lc.AddSource(opts.source(manifests)),
		a.lc.Add("timeline", a.timeline),
		a.lc.Add("runtime events", a.events),
	} {
		if err != nil {
			return err
		}
	}
	if opts.listen == "" {
		return nil
	}
	l, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", opts.listen, err)
	}
	if err := checkListenAddress(l.Addr(), opts.listenNonLoopback); err != nil {
		l.Close()
		return fmt.Errorf("--listen %s: %w", opts.listen, err)
	}
	a.server = newPodServer(opts.nodeName, l, a.records, a.workers, a.rt, a.log.WithName("http"))
	return a.lc.Add("http", a.server)
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

// evictForLocalStorage is the volume manager's Options.Evict (see
// evictForLocalStorage in eviction.go).
func (a *agent) evictForLocalStorage(uid types.UID, message string) {
	if name, err := evictForLocalStorage(a.workers, uid, message); err != nil {
		a.log.Error(err, "Couldn't evict a pod over its emptyDir sizeLimit", "podUID", uid)
	} else if name != "" {
		a.say("evicting %s: %s", name, message)
	}
}

// onReject records and prints a pod admission rejected.
func (a *agent) onReject(_ context.Context, pod *v1.Pod, status v1.PodStatus) {
	var name string
	a.records.edit(pod.UID, func(r *podRecord) {
		r.setPod(pod)
		r.rejected = &status
		name = r.name
	})
	a.lineAt(time.Now(), name, fmt.Sprintf("%-36s %s: %s", "absent → rejected", status.Reason, status.Message))
}

// onEvent prints the events the lifecycle records (an invalid manifest, a
// mirror pod failure); admission rejections are printed by onReject.
func (a *agent) onEvent(_ runtime.Object, eventType, reason, messageFmt string, args ...any) {
	switch reason {
	case admission.ReasonOutOfCPU, admission.ReasonOutOfMemory, admission.ReasonOutOfPods, nodeshutdown.ReasonNodeShutdown, "UnsupportedPod", admission.ReasonUnexpectedAdmissionError:
		return
	}
	a.say("event %s %s: %s", eventType, reason, fmt.Sprintf(messageFmt, args...))
}

// say prints a line about the agent itself.
func (a *agent) say(format string, args ...any) {
	a.lineAt(time.Now(), "", fmt.Sprintf(format, args...))
}

// inStore reports whether config still wants the pod.
func (a *agent) inStore(uid types.UID) bool {
	_, ok := a.store.GetPodByUID(uid)
	return ok
}
