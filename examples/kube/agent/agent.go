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
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/kube"
	"github.com/podkit/podkit/examples/kube/nodemetrics"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podmanager"
	"github.com/podkit/podkit/podworker"
)

// Config configures an Agent. Client, NodeName and StateDir are required;
// every other field has a default.
type Config struct {
	// Client talks to the API server. With a node identity
	// (system:node:<NodeName>, group system:nodes) the agent needs no
	// other rights than a kubelet has under the Node authorizer and the
	// NodeRestriction admission plugin.
	Client kubernetes.Interface
	// NodeName is the name of the Node the agent registers and runs pods
	// for.
	NodeName string
	// StateDir is where the process runtime keeps its records and logs.
	// Keep it across restarts: it is how a restarted agent finds its
	// processes. Only one agent at a time may use it.
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
	// StatusResyncInterval is how long after a successful status write
	// the agent checks the pod's status in the API server again, to put
	// back one someone else changed (kube.StatusWriterOptions.ResyncInterval).
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
	// none: a sandboxed pod's network has a loopback only.
	PodCIDR    netip.Prefix
	BridgeName string
	// Logger receives the agent's logs. Defaults to discarding them.
	Logger logr.Logger

	// Node is the Node registered when none of the name exists. Defaults
	// to NodeObject(NodeName); set it to add labels or taints.
	Node *v1.Node
	// KubeletAPI, when set, serves the kubelet's read endpoints (container
	// logs, /healthz, /metrics) over HTTPS, and publishes them in the
	// Node's status.
	KubeletAPI *KubeletAPIConfig
}

// Agent is one run of podkit-agent. Create it with New, run it with Run.
type Agent struct {
	cfg Config

	// built is closed once Run has built the pod workers; stopped once
	// Run has returned.
	built, stopped chan struct{}

	mu sync.Mutex
	// workers, handler and recorder are set when built is closed.
	workers  *podworker.PodWorkers[processruntime.PodStatus]
	handler  *lifecycle.Handler
	recorder *kube.EventRecorder
	node     *v1.Node
	ran      bool

	// shuttingDown is set by ShutdownNode; the heartbeat then posts the
	// Node NotReady.
	shuttingDown atomic.Bool
}

// New checks cfg and returns an Agent. It starts nothing and contacts
// nothing.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("agent: Config.Client is required")
	case cfg.NodeName == "":
		return nil, errors.New("agent: Config.NodeName is required")
	case cfg.StateDir == "":
		return nil, errors.New("agent: Config.StateDir is required")
	}
	return &Agent{cfg: cfg, built: make(chan struct{}), stopped: make(chan struct{})}, nil
}

// Workers waits until Run has built the agent's pod workers and returns
// them, for inspection: their window, snapshots and WaitFor say where each
// pod stands. After Run has returned they still answer, from the state at
// shutdown. It returns ctx.Err() when ctx ends first, and an error when
// Run returned without building them.
func (a *Agent) Workers(ctx context.Context) (*podworker.PodWorkers[processruntime.PodStatus], error) {
	select {
	case <-a.built:
	case <-a.stopped:
		select {
		case <-a.built:
		default:
			return nil, errors.New("agent: Run returned before the pod workers were built")
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.workers, nil
}

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

// Run registers (or reuses) the Node and runs the agent until ctx ends. It
// returns nil after a clean shutdown: every hook has returned and the
// process runtime is closed. The pods' processes keep running; a later
// Agent on the same StateDir adopts them. It returns an error when the Node
// cannot be registered, the state directory cannot be opened, or a part of
// the agent fails. Run may be called once per Agent.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.ran {
		a.mu.Unlock()
		return errors.New("agent: Run called twice")
	}
	a.ran = true
	a.mu.Unlock()
	defer close(a.stopped)

	cfg := a.cfg
	log := cfg.Logger.WithValues("node", cfg.NodeName)
	cs := cfg.Client
	core := cs.CoreV1()

	want := cfg.Node
	if want == nil {
		want = NodeObject(cfg.NodeName)
	}
	node, err := kube.RegisterNode(ctx, core, want)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	recorder, err := kube.NewEventRecorder(core, cfg.NodeName, kube.EventRecorderOptions{Logger: log.WithName("events")})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer recorder.Close()
	recorder.Eventf(kube.NodeRef(node), v1.EventTypeNormal, kube.ReasonStarting, "%s", kube.MessageStarting)
	store := podmanager.New()

	// Runtime events are recorded as the kubelet's container events, and
	// those that report a change (a process started or ended) ask for a
	// sync of the pod, as the kubelet's PLEG does; the channel decouples
	// the runtime's goroutines from the sync loop.
	events := make(chan processruntime.Event, 256)
	rt, err := processruntime.Open(processruntime.Options{
		StateDir:        cfg.StateDir,
		BackOff:         cfg.RestartBackOff,
		Sandbox:         cfg.Sandbox,
		AllowHostAccess: cfg.AllowHostAccess,
		Masks:           cfg.Masks,
		PodCIDR:         cfg.PodCIDR,
		BridgeName:      cfg.BridgeName,
		Logger:          log.WithName("runtime"),
		OnEvent: func(ev processruntime.Event) {
			recordRuntimeEvent(recorder, store, ev)
			if !triggersSync(ev) {
				return
			}
			select {
			case events <- ev:
			default: // the periodic resync catches up
			}
		},
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer rt.Close()

	writer, err := kube.NewStatusWriter(core, kube.StatusWriterOptions{NodeName: cfg.NodeName, ResyncInterval: cfg.StatusResyncInterval, Logger: log.WithName("status")})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	derive := func(ctx context.Context, pod *v1.Pod) (v1.PodStatus, error) {
		st, err := rt.PodStatus(ctx, pod.UID, time.Time{})
		if err != nil {
			return v1.PodStatus{}, err
		}
		// The store's pod carries the newest status from the API server
		// (readiness gates set by others), as the kubelet derives a status
		// from its pod manager's pod.
		if latest, ok := store.GetPodByUID(pod.UID); ok {
			pod = latest
		}
		return processruntime.APIStatus(pod, st), nil
	}
	metrics, err := nodemetrics.New(nodemetrics.Options{NodeName: cfg.NodeName})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	syncer := nodemetrics.WrapSyncer(rt, metrics, podRuns(rt))
	workers, err := podworker.New(kube.WrapSyncer(syncer, writer, derive), podworker.Options[processruntime.PodStatus]{
		Metrics:        metrics.Provider(),
		Status:         rt,
		ResyncInterval: cfg.ResyncInterval,
		Logger:         log.WithName("podworker"),
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}

	sources := []string{mirror.ApiserverSource}
	var manifests *podconfig.ManifestSource
	if cfg.ManifestDir != "" {
		manifests, err = podconfig.NewManifestSource(cfg.ManifestDir, podconfig.ManifestOptions{
			NodeName: cfg.NodeName,
			Interval: cfg.ManifestInterval,
			Recorder: recorder,
			Logger:   log.WithName("manifests"),
		})
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		sources = append(sources, manifests.Source())
	}
	mirrors, err := mirror.NewClient(kube.NewPodAPI(core), mirror.ClientOptions{
		NodeName: cfg.NodeName,
		NodeUID:  kube.NodeUID(core, cfg.NodeName),
		Logger:   log.WithName("mirror"),
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	handler, err := lifecycle.NewHandler(workers, store, lifecycle.Options{
		// The runtime refuses, at once and with its reason, the pods it
		// cannot run.
		AdmitHandlers: append([]admission.Handler{rt}, resourceAdmission(node)...),
		Recorder:      recorder,
		MirrorClient:  mirrors,
		RuntimePods: lifecycle.RuntimePodListerFunc(func(context.Context) ([]podworker.RuntimePod, error) {
			return rt.RuntimePods(), nil
		}),
		OnReject: func(_ context.Context, pod *v1.Pod, status v1.PodStatus) {
			writer.SetPodStatus(pod, status)
		},
		Sources:              sources,
		HousekeepingInterval: cfg.HousekeepingInterval,
		Logger:               log.WithName("lifecycle"),
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	config, err := podconfig.New(podconfig.Options{Recorder: recorder, Logger: log.WithName("config")})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	apiSource, err := kube.NewAPISource(core, cfg.NodeName, kube.APISourceOptions{Logger: log.WithName("apisource")})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}

	if err := observe(metrics, workers, store, rt); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	var serveKubeletAPI func(context.Context) error
	if cfg.KubeletAPI != nil {
		serveKubeletAPI, err = listenKubeletAPI(ctx, cfg.KubeletAPI, cfg.NodeName, cs, store, rt, metrics, log.WithName("kubeletapi"))
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}

	a.mu.Lock()
	a.workers = workers
	a.handler, a.recorder, a.node = handler, recorder, node
	a.mu.Unlock()
	close(a.built)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	run := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("agent: %s: %w", name, err)
				}
				errMu.Unlock()
				cancel()
			}
		}()
	}
	run("event recorder", recorder.Run)
	run("status writer", func(ctx context.Context) error { return writer.Run(ctx, workers) })
	run("sync loop", func(ctx context.Context) error { return handler.Run(ctx, config.Updates()) })
	run("API source", func(ctx context.Context) error { return apiSource.Run(ctx, config) })
	if manifests != nil {
		run("manifest source", func(ctx context.Context) error { return manifests.Run(ctx, config) })
	}
	if serveKubeletAPI != nil {
		run("kubelet API", serveKubeletAPI)
	}
	if cfg.HeartbeatInterval >= 0 {
		hb := &kube.NodeHeartbeat{Client: cs, NodeName: cfg.NodeName, Interval: cfg.HeartbeatInterval, Health: a.health, Recorder: recorder}
		run("node heartbeat", hb.Run)
	}
	run("runtime events", func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case ev := <-events:
				if pod, ok := store.GetPodByUID(ev.UID); ok {
					handler.HandlePodSyncs(ctx, []*v1.Pod{pod})
				}
			}
		}
	})
	log.Info("podkit agent running")
	wg.Wait()
	log.Info("podkit agent stopped")
	return firstErr
}
