package agent

import (
	"context"
	"fmt"
	"io"
	"net/netip"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/kube/hollowruntime"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/probe"
	"github.com/podkit/podkit/lifecycle/volume"
	"github.com/podkit/podkit/podworker"
)

// Runtime names the pod runtime an Agent runs its pods with
// (Config.Runtime).
type Runtime string

// The runtimes an Agent can run its pods with.
const (
	// RuntimeProcess runs each container as local processes (package
	// processruntime), in a sandbox of the pod's where the machine allows
	// it. The default.
	RuntimeProcess Runtime = "process"
	// RuntimeHollow runs no process at all (package hollowruntime): each
	// pod goes through the same engine, status writes, events and Node
	// traffic as over the process runtime, but its containers only
	// pretend to run. It is the "hollow node" of Kubernetes' scalability
	// tests (kubemark): hundreds of nodes on one machine. The kubelet
	// API's logs, exec, attach and port-forward answer that a hollow
	// container has no process, and its stats report no usage.
	RuntimeHollow Runtime = "hollow"
)

// ParseRuntime returns the Runtime named s: "process" (or "", the
// default) or "hollow". Any other name is an error.
func ParseRuntime(s string) (Runtime, error) {
	switch Runtime(s) {
	case "", RuntimeProcess:
		return RuntimeProcess, nil
	case RuntimeHollow:
		return RuntimeHollow, nil
	}
	return "", fmt.Errorf("agent: unknown runtime %q (want %q or %q)", s, RuntimeProcess, RuntimeHollow)
}

// podRuntime is what the agent needs of its runtime: the pod workers'
// hooks and status, admission, housekeeping's list of the pods it holds,
// the per-pod features, the pod network, its containment, and what the
// kubelet API serves. Both *processruntime.Runtime and
// *hollowruntime.Runtime are one.
type podRuntime interface {
	podworker.PodSyncer[processruntime.PodStatus]
	podworker.RuntimePodSyncer
	podworker.StatusSource[processruntime.PodStatus]
	podworker.StoppedChecker[processruntime.PodStatus]
	admission.Handler
	// RuntimePods lists the pods the runtime holds, for housekeeping.
	RuntimePods() []podworker.RuntimePod
	// UsePodFeatures gives the runtime the lifecycle's per-pod features.
	UsePodFeatures(*lifecycle.PodFeatures)
	// StartNetwork gives the runtime the node's pod range and bridge.
	StartNetwork(podCIDR netip.Prefix, bridgeName string) error
	// Containment says how the runtime contains its pods.
	Containment() processruntime.Containment
	// Close releases the runtime (a process runtime's processes keep
	// running).
	Close() error
	kubeletRuntime
}

// kubeletRuntime is what the kubelet API serves of a runtime: container
// logs, the exec, attach and port-forward sessions, the pods' stats and
// the running pods. The hollow runtime's sessions and logs fail with
// hollowruntime.ErrNoProcesses.
type kubeletRuntime interface {
	ReadLogs(ctx context.Context, uid types.UID, container string, opts processruntime.LogOptions, w io.Writer) error
	Exec(ctx context.Context, uid types.UID, container string, cmd []string, s processruntime.Streams) (int, error)
	Attach(ctx context.Context, uid types.UID, container string, s processruntime.Streams) error
	PortForward(ctx context.Context, uid types.UID, port int32, stream io.ReadWriteCloser) error
	PodStats(ctx context.Context) ([]processruntime.PodStats, error)
	RunningPods() []processruntime.RunningPod
}

var (
	_ podRuntime = (*processruntime.Runtime)(nil)
	_ podRuntime = (*hollowruntime.Runtime)(nil)
)

// runtimeFeatures is what the per-pod features take of a runtime beyond
// podRuntime: what runs exec probes and hooks in its containers, and the
// volume manager's root and ID mapping. The zero value (the hollow
// runtime's) has none: no exec probes, no volume manager.
type runtimeFeatures struct {
	exec       probe.ExecRunner
	volumeRoot string
	mapIDs     volume.IDMapper
}

// openRuntime opens the runtime cfg.Runtime names (checked by New), with
// onEvent as its events' sink and log as its logger.
func openRuntime(cfg Config, log logr.Logger, onEvent func(processruntime.Event)) (podRuntime, runtimeFeatures, error) {
	kind, err := ParseRuntime(string(cfg.Runtime))
	if err != nil {
		return nil, runtimeFeatures{}, err
	}
	if kind == RuntimeHollow {
		rt, err := hollowruntime.New(hollowruntime.Options{BackOff: cfg.RestartBackOff, OnEvent: onEvent, Logger: log, HostIPs: hostIPs(cfg)})
		if err != nil {
			return nil, runtimeFeatures{}, err
		}
		return rt, runtimeFeatures{}, nil
	}
	rt, err := processruntime.Open(processruntime.Options{
		StateDir:        cfg.StateDir,
		BackOff:         cfg.RestartBackOff,
		Sandbox:         cfg.Sandbox,
		StageExecutable: cfg.StageExecutable,
		HostIPs:         hostIPs(cfg),
		AllowHostAccess: cfg.AllowHostAccess,
		Masks:           cfg.Masks,
		PodCIDR:         cfg.PodCIDR,
		BridgeName:      bridgeName(cfg),
		ClusterDNS:      cfg.ClusterDNS,
		ClusterDomain:   cfg.ClusterDomain,
		ResolvConf:      cfg.ResolvConf,
		ImageConfigs:    cfg.ImageConfigs,
		Logger:          log,
		OnEvent:         onEvent,
	})
	if err != nil {
		return nil, runtimeFeatures{}, err
	}
	return rt, runtimeFeatures{exec: rt, volumeRoot: volumeRoot(rt), mapIDs: rt.MapIDs}, nil
}

// hostIPs are the node's addresses the runtime reports as its pods'
// status.hostIP: the kubelet API's Address, which is the Node's
// InternalIP; none without a kubelet API (the runtime's default then).
func hostIPs(cfg Config) []string {
	if cfg.KubeletAPI == nil || cfg.KubeletAPI.Address == nil {
		return nil
	}
	return []string{cfg.KubeletAPI.Address.String()}
}

// volumeRoot is where the volume manager keeps the pods' volumes: the
// runtime's VolumeRoot where pods run in sandboxes, which mount them; ""
// (no volume manager) otherwise, where a mountPath is just a host path and
// the runtime says so (processruntime.ReasonVolumesNotMounted).
func volumeRoot(rt *processruntime.Runtime) string {
	if !rt.Containment().Sandbox {
		return ""
	}
	return rt.VolumeRoot()
}
