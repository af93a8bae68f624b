package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/kube/apisource"
	"github.com/podkit/podkit/examples/kube/events"
	"github.com/podkit/podkit/examples/kube/mirrorpods"
	"github.com/podkit/podkit/examples/kube/nodemetrics"
	"github.com/podkit/podkit/examples/kube/nodestatus"
	"github.com/podkit/podkit/examples/kube/objectcache"
	"github.com/podkit/podkit/examples/kube/serviceenv"
	"github.com/podkit/podkit/examples/kube/statuswriter"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/volume"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// Config configures an Agent. Client and NodeName are required, and
// StateDir for the process runtime; every other field has a default. The
// fields named as the process runtime's are ignored by the hollow one.
type Config struct {
	// Client talks to the API server. With a node identity
	// (system:node:<NodeName>, group system:nodes) the agent needs no
	// other rights than a kubelet has under the Node authorizer and the
	// NodeRestriction admission plugin.
	Client kubernetes.Interface
	// NodeName is the name of the Node the agent registers and runs pods
	// for.
	NodeName string
	// Runtime is the pod runtime: RuntimeProcess (local processes) or
	// RuntimeHollow (no processes, for hollow-node scalability tests).
	// Defaults to RuntimeProcess.
	Runtime Runtime
	// StateDir is where the process runtime keeps its records and logs
	// (required with it; the hollow runtime keeps nothing). Keep it
	// across restarts: it is how a restarted agent finds its processes.
	// Only one agent at a time may use it.
	StateDir string
	// ManifestDir, when set, is a directory of static pod manifests; each
	// gets a mirror pod in the API server. Defaults to none.
	ManifestDir string
	// ManifestInterval is how often ManifestDir is read. Defaults to
	// podconfig.DefaultManifestInterval.
	ManifestInterval time.Duration
	// HousekeepingInterval is how often housekeeping runs (orphans, mirror
	// pods). Defaults to lifecycle.DefaultHousekeepingInterval.
	HousekeepingInterval time.Duration
	// ResyncInterval is how often a running pod is synced again when
	// nothing happened. Defaults to the pod workers' default.
	ResyncInterval time.Duration
	// VolumeRefreshInterval is how often the pods' volumes follow their
	// sources (config maps, secrets, the downward API) and their emptyDirs
	// with a sizeLimit are measured; a pod whose emptyDir holds more is
	// evicted, as the kubelet's eviction manager evicts it. Defaults to
	// volume.DefaultRefreshInterval.
	VolumeRefreshInterval time.Duration
	// StatusResyncInterval is how long after a successful status write
	// the agent checks the pod's status in the API server again, to put
	// back one someone else changed (statuswriter.Options.ResyncInterval).
	// Defaults to one minute; negative disables these checks.
	StatusResyncInterval time.Duration
	// HeartbeatInterval is how often the Node's Ready condition and Lease
	// are renewed. Defaults to 10 seconds; negative disables the
	// heartbeat.
	HeartbeatInterval time.Duration
	// RestartBackOff is the process runtime's first restart backoff for a
	// container that keeps exiting. Defaults to the runtime's.
	RestartBackOff time.Duration
	// Sandbox is the process runtime's Options.Sandbox: whether each pod
	// runs in a sandbox of its own. Defaults to processruntime.SandboxAuto
	// (where the machine allows it).
	Sandbox processruntime.SandboxMode
	// StageExecutable is the process runtime's Options.StageExecutable:
	// the program (processruntime's cmd/podkit-stages) each pod's sandbox
	// stages and log shims run, a fraction of the agent's start-up CPU
	// each. Defaults to "": the agent's own executable, run again.
	StageExecutable string
	// AllowHostAccess is the process runtime's Options.AllowHostAccess:
	// whether pods may ask for privileged containers, host namespaces and
	// hostPath volumes. Defaults to false: such pods are rejected
	// (HostAccessNotAllowed).
	AllowHostAccess bool
	// Masks are the host paths no pod may see beyond the state directory
	// (always hidden): the agent's kubeconfig, certificates and keys.
	Masks []string
	// PodCIDR and BridgeName are the process runtime's pod network
	// (Options.PodCIDR, BridgeName): with a range, each sandboxed pod gets
	// an address of it on the node's bridge, in its status. Defaults to
	// none: a sandboxed pod's network has a loopback only (but see
	// PodCIDRFromNode). BridgeName defaults to BridgeName(range).
	PodCIDR    netip.Prefix
	BridgeName string
	// ImageConfigs is the process runtime's Options.ImageConfigs: the
	// configurations of images the node knows beyond the runtime's
	// defaults, for containers without a command of their own. Defaults
	// to none.
	ImageConfigs processruntime.ImageConfigs
	// PodCIDRFromNode, when PodCIDR is not set, takes the registered
	// Node's spec.podCIDR as the pod range, as a kubelet does: Run waits
	// up to PodCIDRWait (default DefaultPodCIDRWait) after registering for
	// the controller manager's node IPAM to assign one, then starts the
	// sync loop; without one it goes on with a NoPodCIDR warning.
	PodCIDRFromNode bool
	PodCIDRWait     time.Duration
	// ClusterDNS, ClusterDomain and ResolvConf are the process runtime's
	// name resolution (Options.ClusterDNS, ...): the cluster DNS servers
	// of ClusterFirst pods, the cluster domain, the host's resolv.conf.
	// Default to none, none and /etc/resolv.conf.
	ClusterDNS    []netip.Addr
	ClusterDomain string
	ResolvConf    string
	// Logger receives the agent's logs. Defaults to discarding them.
	Logger logr.Logger

	// Node is the Node registered when none of the name exists. Defaults
	// to NodeObject(NodeName); set it to add labels or taints.
	Node *v1.Node
	// KubeletAPI, when set, serves the kubelet API (container logs,
	// exec, attach, port-forward, stats, /healthz, /metrics) over HTTPS,
	// and publishes it in the Node's status.
	KubeletAPI *KubeletAPIConfig
	// Trace, when set, is told when each pod reaches each stage of its
	// start (TraceStage): for finding where startup time goes, as
	// BenchmarkPodStartup does. Defaults to none, which costs nothing.
	Trace TraceFunc
	// EventClient, when set, is the client the agent's events go
	// through, so they spend a rate budget of their own rather than
	// Client's, as the kubelet's (--event-qps 50, --event-burst 100) do.
	// Defaults to Client.
	EventClient kubernetes.Interface
}

// Agent is one run of podkit-agent: a lifecycle.Agent over a pod runtime
// (the process runtime, or the hollow one), whose sources are the API server's pods bound to the node (and
// a manifest directory), and whose loops are the status writer, the event
// recorder, the node heartbeat and the kubelet API. Create it with New,
// run it with Run.
type Agent struct {
	cfg      Config
	log      logr.Logger
	rt       podRuntime
	lc       *lifecycle.Agent[processruntime.PodStatus]
	recorder *events.Recorder
	// registration registers the Node, and again when it is deleted.
	registration *nodestatus.Registration

	// node is the registered Node, set by Run before the sync loop starts
	// (admission reads its allocatable resources).
	node atomic.Pointer[v1.Node]
	// shuttingDown is set by ShutdownNode; the heartbeat then posts the
	// Node NotReady.
	shuttingDown atomic.Bool

	mu  sync.Mutex
	ran bool
}

// New checks cfg and builds the agent: it opens the runtime (the process
// runtime on StateDir adopts the processes a previous agent left there,
// and watches them) and assembles the lifecycle around it. It contacts
// nothing: Run registers the Node and runs the agent, and releases the
// runtime when it returns; an Agent that will not run is released with
// Close.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("agent: Config.Client is required")
	case cfg.NodeName == "":
		return nil, errors.New("agent: Config.NodeName is required")
	}
	kind, err := ParseRuntime(string(cfg.Runtime))
	if err != nil {
		return nil, err
	}
	if kind == RuntimeProcess && cfg.StateDir == "" {
		return nil, errors.New("agent: Config.StateDir is required (by the process runtime)")
	}
	a := &Agent{cfg: cfg, log: cfg.Logger.WithValues("node", cfg.NodeName)}
	if err := a.build(); err != nil {
		a.Close()
		return nil, fmt.Errorf("agent: %w", err)
	}
	return a, nil
}

// build assembles the agent: the runtime, the syncer wrapped by the
// metrics and the status writer, the lifecycle, its sources and its loops.
func (a *Agent) build() error {
	cfg, log, core := a.cfg, a.log, a.cfg.Client.CoreV1()
	var err error
	if a.recorder, err = events.New(eventClient(cfg).CoreV1(), cfg.NodeName, events.Options{Logger: log.WithName("events")}); err != nil {
		return err
	}
	runtimeEvs := &runtimeEvents{recorder: a.recorder}
	var feats runtimeFeatures
	if a.rt, feats, err = openRuntime(cfg, log.WithName("runtime"), runtimeEvs.on); err != nil {
		return err
	}
	writer, err := statuswriter.New(core, statuswriter.Options{NodeName: cfg.NodeName, ResyncInterval: cfg.StatusResyncInterval, Logger: log.WithName("status"), Trace: writeTracer(cfg.Trace)})
	if err != nil {
		return err
	}
	metrics, err := nodemetrics.New(nodemetrics.Options{NodeName: cfg.NodeName})
	if err != nil {
		return err
	}
	mirrors, err := mirror.NewClient(mirrorpods.NewPodAPI(core), mirror.ClientOptions{NodeName: cfg.NodeName, NodeUID: mirrorpods.NodeUID(core, cfg.NodeName), Logger: log.WithName("mirror")})
	if err != nil {
		return err
	}
	// The pods' secrets and config maps, one watch per object referenced
	// (the Node authorizer's rule); a change syncs the pods that reference
	// it. The lifecycle is built below, hence the pointer.
	var lcRef atomic.Pointer[lifecycle.Agent[processruntime.PodStatus]]
	// The service variables of the pods' environments (enableServiceLinks),
	// from a watch of the cluster's Services, as a kubelet's.
	services, err := serviceenv.New(cfg.Client, log.WithName("services"))
	if err != nil {
		return err
	}
	objects, err := objectcache.New(cfg.Client, objectcache.Options{
		RequestSync: func(uid types.UID) {
			if lc := lcRef.Load(); lc != nil {
				lc.RequestSync(uid)
			}
		},
		Logger: log.WithName("objectcache"),
	})
	if err != nil {
		return err
	}
	a.registration = a.newRegistration(writer)
	syncer := tracedSyncer(statuswriter.WrapSyncer(nodemetrics.WrapSyncer(a.rt, metrics, podRuns(a.rt)), writer, a.derive), cfg.Trace)
	a.lc, err = lifecycle.NewAgent(syncer, lifecycle.AgentOptions[processruntime.PodStatus]{
		Workers: podworker.Options[processruntime.PodStatus]{Metrics: metrics.Provider(), Status: a.rt, ResyncInterval: cfg.ResyncInterval},
		SyncLoop: lifecycle.SyncLoopOptions{
			// The runtime refuses, at once and with its reason, the pods
			// it cannot run.
			AdmitHandlers:        []admission.Handler{a.rt, admission.HandlerFunc(a.admitResources)},
			MirrorClient:         mirrors,
			RuntimePods:          lifecycle.RuntimePodListerFunc(func(context.Context) ([]podworker.RuntimePod, error) { return a.rt.RuntimePods(), nil }),
			OnReject:             func(_ context.Context, pod *v1.Pod, status v1.PodStatus) { writer.SetPodStatus(pod, status) },
			HousekeepingInterval: cfg.HousekeepingInterval,
		},
		Recorder: a.recorder,
		Logger:   log,
		// Probes, hooks, the active deadline, environments and volumes,
		// wired once by the assembly over the runtime (exec probes and
		// hooks), the object cache and the API server's TokenRequest.
		Features: &lifecycle.PodFeatureOptions{
			Exec:       feats.exec,
			Objects:    objects,
			Tokens:     objectcache.NewTokenRequester(cfg.Client),
			VolumeRoot: feats.volumeRoot,
			Env:        podenv.Options{NodeAllocatable: a.allocatable, ServiceEnv: services.Env},
			Volumes: volume.Options{
				MapIDs: feats.mapIDs, NodeAllocatable: a.allocatable,
				RefreshInterval: cfg.VolumeRefreshInterval,
				Evict:           a.evictForLocalStorage,
			},
		},
	})
	if err != nil {
		return err
	}
	lcRef.Store(a.lc)
	a.rt.UsePodFeatures(a.lc.Features())
	runtimeEvs.lc.Store(a.lc)
	if err := observe(metrics, a.lc.Workers(), a.lc.Store(), a.rt); err != nil {
		return err
	}
	apiSource, err := apisource.New(core, cfg.NodeName, apisource.Options{Logger: log.WithName("apisource")})
	if err != nil {
		return err
	}
	adds := []error{
		a.lc.AddSource(apiSource),
		// A pod's objects are watched from its hand-over to the workers
		// until the workers forget it.
		a.lc.Add("object cache", lifecycle.PodLoop{Runnable: objects, PodObserver: lifecycle.PodObserverFuncs{
			PodUpdatedFunc: objects.RegisterPod, PodForgottenFunc: objects.UnregisterPod,
		}}),
		a.lc.Add("event recorder", a.recorder),
		a.lc.Add("services", services),
		a.lc.Add("status writer", lifecycle.RunnableFunc(func(ctx context.Context) error { return writer.Run(ctx, a.lc.Workers()) })),
		a.lc.Add("node registration", lifecycle.RunnableFunc(a.registration.Run)),
	}
	if cfg.Trace != nil {
		adds = append(adds, a.lc.Add("trace", traceLoop(cfg.Trace)))
	}
	if cfg.ManifestDir != "" {
		manifests, err := podconfig.NewManifestSource(cfg.ManifestDir, podconfig.ManifestOptions{NodeName: cfg.NodeName, Interval: cfg.ManifestInterval, Recorder: a.recorder, Logger: log.WithName("manifests")})
		if err != nil {
			return err
		}
		adds = append(adds, a.lc.AddSource(manifests))
	}
	if cfg.HeartbeatInterval >= 0 {
		hb := &nodestatus.Heartbeat{Client: cfg.Client, NodeName: cfg.NodeName, Interval: cfg.HeartbeatInterval, Health: a.health, Recorder: a.recorder, OnNodeMissing: a.registration.NodeMissing}
		adds = append(adds, a.lc.Add("node heartbeat", lifecycle.RunnableFunc(hb.Run)))
	}
	if cfg.KubeletAPI != nil {
		api, err := newKubeletAPI(cfg.KubeletAPI, cfg.NodeName, cfg.Client, a.lc.Store(), a.lc.Workers().CouldHaveRunningContainers, a.rt, metrics, log.WithName("kubeletapi"))
		if err != nil {
			return err
		}
		adds = append(adds, a.lc.Add("kubelet API", api))
	}
	return errors.Join(adds...)
}

// derive is the status the API server should show for pod, from what the
// runtime knows now. The store's pod carries the newest status from the
// API server (readiness gates set by others), as the kubelet derives a
// status from its pod manager's pod.
func (a *Agent) derive(ctx context.Context, pod *v1.Pod) (v1.PodStatus, error) {
	st, err := a.rt.PodStatus(ctx, pod.UID, time.Time{})
	if err != nil {
		return v1.PodStatus{}, err
	}
	if latest, ok := a.lc.Store().GetPodByUID(pod.UID); ok {
		pod = latest
	}
	return processruntime.APIStatus(pod, st), nil
}

// Run registers (or reuses) the Node and runs the agent until ctx ends. It
// returns nil after a clean shutdown: every hook has returned and the
// runtime is closed. The process runtime's pods keep running; a later
// Agent on the same StateDir adopts them (a hollow runtime's pods end
// with it: a new Agent starts them again). It returns an error when the Node
// cannot be registered or a part of the agent fails. Run may be called
// once per Agent.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.ran {
		a.mu.Unlock()
		return errors.New("agent: Run called twice")
	}
	a.ran = true
	a.mu.Unlock()
	defer a.Close()

	node, err := a.registration.Register(ctx)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.node.Store(node)
	a.recorder.Eventf(events.NodeRef(node), v1.EventTypeNormal, events.ReasonStarting, "%s", events.MessageStarting)
	if err := a.startPodNetwork(ctx, node); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.log.Info("podkit agent running")
	err = a.lc.Run(ctx)
	a.log.Info("podkit agent stopped")
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// Close releases what New opened: the runtime (the process runtime's
// processes keep running) and the event recorder. Run calls it when it returns; call it
// for an Agent that will not run. It is idempotent.
func (a *Agent) Close() {
	if a.rt != nil {
		a.rt.Close()
	}
	if a.recorder != nil {
		a.recorder.Close()
	}
}

// Workers returns the agent's pod workers, for inspection: their window,
// snapshots and WaitFor say where each pod stands. After Run has returned
// they still answer, from the state at shutdown.
func (a *Agent) Workers() *podworker.PodWorkers[processruntime.PodStatus] { return a.lc.Workers() }

// Containment says how the agent's runtime contains its pods (sandbox,
// cgroups, limits, network), and HostAccess whether pods may ask for what
// reaches the host (Config.AllowHostAccess): for a command's startup
// message. Safe to call from any goroutine.
func (a *Agent) Containment() (c processruntime.Containment, hostAccess bool) {
	return a.rt.Containment(), a.cfg.AllowHostAccess
}

// Client returns Config.Client, for the agent's command to read what it
// wrote.
func (a *Agent) Client() kubernetes.Interface { return a.cfg.Client }

// SourcesReady reports whether every source of pods (the API server, the
// manifest directory) has delivered its pods to the pod workers at least
// once since Run started: before, a node shutdown would not know every
// pod. Safe to call from any goroutine.
func (a *Agent) SourcesReady() bool { return a.lc.SyncLoop().SourcesReady() }

// ReasonUnsupportedPod is the admission rejection reason of a pod the
// process runtime cannot run (processruntime.Runtime.ValidatePod says why;
// the runtime, an admission handler, gives its other reasons too, such as
// processruntime.ReasonHostAccessNotAllowed).
const ReasonUnsupportedPod = processruntime.ReasonUnsupportedPod

// NodeObject returns the Node an agent registers for nodeName: the
// well-known hostname, OS and architecture labels, a Hostname address, and
// the machine's CPUs and memory and a pod count as capacity, so a
// scheduler can place pods on it.
func NodeObject(nodeName string) *v1.Node {
	capacity := v1.ResourceList{
		v1.ResourceCPU:  *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI),
	}
	addMemory(capacity)
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: nodeName,
			Labels: map[string]string{
				v1.LabelHostname:   nodeName,
				v1.LabelOSStable:   runtime.GOOS,
				v1.LabelArchStable: runtime.GOARCH,
			},
		},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Addresses:   []v1.NodeAddress{{Type: v1.NodeHostName, Address: nodeName}},
			NodeInfo:    systemInfo(),
		},
	}
}
