package clustertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/nodestatus"
)

// Defaults of Options.
const (
	DefaultHeartbeatInterval      = time.Second
	DefaultNodeMonitorGracePeriod = 10 * time.Second
	DefaultPodEvictionSeconds     = 2
	// DefaultHousekeepingInterval is the default agent's housekeeping
	// interval (orphans, tombstones, mirror pods).
	DefaultHousekeepingInterval = time.Second
)

// Options configure a cluster. The zero value is a control plane with no
// nodes; Nodes adds some.
type Options struct {
	// Nodes are the podkit nodes started with the cluster; Start returns
	// once each is Ready and schedulable. AddNode adds more later.
	Nodes []NodeOptions
	// Dir holds everything the cluster writes: the control plane's
	// certificates, keys, kubeconfigs and etcd data in Dir/control-plane,
	// and each node's state directory in Dir/nodes, apart, with only the
	// owner allowed in. Empty: a new temporary directory, removed by
	// Close. A Dir given is kept.
	Dir string
	// HeartbeatInterval is how often each node renews its Ready condition
	// and Lease. Defaults to DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// NodeStatusReportInterval, when positive, is how often a node's
	// heartbeat patches its Ready condition when nothing changed
	// (nodestatus.Heartbeat.StatusReportInterval); the beats between
	// renew only its Lease, in one request. The kubelet's default is 5
	// minutes; a hollow-node benchmark of many nodes wants it. Zero, the
	// default, patches the status at every beat.
	NodeStatusReportInterval time.Duration
	// NodeMonitorGracePeriod is how long a node may go without a heartbeat
	// before the node lifecycle controller marks it Unknown (not ready)
	// and taints it. Defaults to DefaultNodeMonitorGracePeriod (the
	// kubelet's default is 50s, for a 10s heartbeat).
	NodeMonitorGracePeriod time.Duration
	// PodEvictionSeconds is how long a pod stays on a node that is not
	// ready or unreachable before it is evicted: the toleration seconds
	// the API server gives every pod. Defaults to
	// DefaultPodEvictionSeconds (Kubernetes: 300).
	PodEvictionSeconds int
	// NodeIP is the address the nodes serve the kubelet API on and
	// publish as their InternalIP. Defaults to nodestatus.HostIP(). The API server's
	// node proxy (kubectl get --raw /api/v1/nodes/<node>/proxy/metrics)
	// refuses loopback addresses; pods/log (kubectl logs) takes them.
	NodeIP net.IP
	// NewAgent builds the agent of a node, at each start of the node.
	// Defaults to DefaultAgent: podkit's agent over the process runtime.
	// Give it your own to run your syncer in the cluster.
	NewAgent func(NodeEnv) (Agent, error)
	// Logger receives the agents' logs, each named by its node. Defaults
	// to discarding them.
	Logger logr.Logger
	// ControlPlaneLog, when set, receives the control plane's output: the
	// components' logs (klog) and, when Start builds the control plane,
	// the go command's. Nil discards it: the control plane is quiet. Give
	// os.Stderr to see it. It is written from a goroutine of its own.
	ControlPlaneLog io.Writer
	// ControlPlane is the path of a podkit-controlplane binary to run.
	// Empty: Start builds one with BuildControlPlane.
	ControlPlane string
	// ClusterCIDR is the cluster's pod range; the controller manager's
	// node IPAM gives each Node a /24 of it as spec.podCIDR, and the
	// default agent puts its pods on a bridge of the node's own with
	// addresses of that /24. Defaults to a 10.x.0.0/16 (x from 64 to 191)
	// holding no address of this host, chosen at Start (Cluster.ClusterCIDR).
	ClusterCIDR netip.Prefix
	// ClusterDNS and ClusterDomain are the nodes' name resolution (see
	// processruntime's Options.ClusterDNS): the cluster runs no DNS server,
	// so ClusterDNS defaults to none (ClusterFirst pods resolve as Default,
	// with a MissingClusterDNS warning, as on a kubelet without one);
	// ClusterDomain defaults to DefaultClusterDomain.
	ClusterDNS    []netip.Addr
	ClusterDomain string
	// MetricsServer runs metrics-server (sigs.k8s.io/metrics-server, at
	// the version internal/metricsserver/go.mod pins) beside the control
	// plane, as the resource metrics API (metrics.k8s.io) that kubectl top and the
	// horizontal pod autoscaler read, from the nodes' /metrics/resource.
	// Start builds it (BuildMetricsServer) unless MetricsServerBinary
	// names one, and returns once the API server reports its APIService
	// Available (so discovery, and kubectl's cache of it, lists
	// metrics.k8s.io), before its first scrape (kubectl top answers after
	// two scrapes, 10 seconds apart).
	MetricsServer       bool
	MetricsServerBinary string
	// StageExecutable is the program (processruntime's cmd/podkit-stages)
	// the default agents run their pods' sandbox stages and log shims from
	// (NodeEnv.StageExecutable, agent.Config.StageExecutable), at a fraction
	// of the CPU per pod start of running this program's own executable
	// again. Empty: Start builds it with BuildStages, unless
	// OwnStageExecutable.
	StageExecutable string
	// OwnStageExecutable leaves NodeEnv.StageExecutable empty: the agents
	// run their pods' stages from their own executable (the test binary),
	// as an agent.Config without StageExecutable does. Start builds no
	// stages program.
	OwnStageExecutable bool
	// APIServerFlags, SchedulerFlags and ControllerManagerFlags are extra
	// command-line flags of each component, applied after (and so
	// winning over) the harness's own.
	APIServerFlags, SchedulerFlags, ControllerManagerFlags []string
}

// withDefaults returns o with every default filled in.
func (o Options) withDefaults() (Options, error) {
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = DefaultNodeMonitorGracePeriod
	}
	if o.PodEvictionSeconds == 0 {
		o.PodEvictionSeconds = DefaultPodEvictionSeconds
	}
	if o.NewAgent == nil {
		o.NewAgent = DefaultAgent
	}
	if o.NodeIP == nil {
		o.NodeIP = nodestatus.HostIP()
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = DefaultClusterDomain
	}
	if o.OwnStageExecutable && o.StageExecutable != "" {
		return o, fmt.Errorf("clustertest: OwnStageExecutable and StageExecutable (%q) both set", o.StageExecutable)
	}
	if o.ClusterCIDR.IsValid() {
		if err := checkClusterCIDR(o.ClusterCIDR); err != nil {
			return o, err
		}
	} else {
		var err error
		if o.ClusterCIDR, err = chooseClusterCIDR(); err != nil {
			return o, err
		}
	}
	switch {
	case o.HeartbeatInterval < 0:
		return o, fmt.Errorf("clustertest: HeartbeatInterval is negative (%v)", o.HeartbeatInterval)
	case o.NodeMonitorGracePeriod <= o.HeartbeatInterval:
		return o, fmt.Errorf("clustertest: NodeMonitorGracePeriod (%v) must be longer than HeartbeatInterval (%v)", o.NodeMonitorGracePeriod, o.HeartbeatInterval)
	case o.NodeStatusReportInterval < 0:
		return o, fmt.Errorf("clustertest: NodeStatusReportInterval is negative (%v)", o.NodeStatusReportInterval)
	case o.PodEvictionSeconds < 0:
		return o, fmt.Errorf("clustertest: PodEvictionSeconds is negative (%d)", o.PodEvictionSeconds)
	}
	seen := map[string]bool{}
	for _, n := range o.Nodes {
		if err := n.validate(); err != nil {
			return o, err
		}
		if seen[n.Name] {
			return o, fmt.Errorf("clustertest: two nodes are named %q", n.Name)
		}
		seen[n.Name] = true
	}
	return o, nil
}

// NodeOptions describe one podkit node.
type NodeOptions struct {
	// Name is the Node's name (required), a DNS subdomain.
	Name string
	// Labels are added to the Node's (hostname, OS, architecture).
	Labels map[string]string
	// Taints are the Node's taints at registration.
	Taints []v1.Taint
}

func (n NodeOptions) validate() error {
	if n.Name == "" {
		return fmt.Errorf("clustertest: a node has no name")
	}
	if errs := validation.IsDNS1123Subdomain(n.Name); len(errs) > 0 {
		return fmt.Errorf("clustertest: node name %q: %s", n.Name, strings.Join(errs, "; "))
	}
	return nil
}

// Nodes returns n plain nodes, named node-0 to node-<n-1>.
func Nodes(n int) []NodeOptions {
	out := make([]NodeOptions, n)
	for i := range out {
		out[i].Name = fmt.Sprintf("node-%d", i)
	}
	return out
}

// Agent is a node agent the harness runs. Run runs it until ctx ends and
// returns nil after a clean stop; the harness calls it once per Agent.
type Agent interface {
	Run(ctx context.Context) error
}

// NodeEnv is what an agent gets from the harness for one node.
type NodeEnv struct {
	// Name is the node's name.
	Name string
	// Client and Config act as the node: user system:node:<Name> in group
	// system:nodes, by a client certificate of the cluster CA.
	Client kubernetes.Interface
	Config *rest.Config
	// StateDir is the node's state directory, the same at every start of
	// the node.
	StateDir string
	// Node is the Node to register: agent.NodeObject with the node's
	// labels and taints.
	Node *v1.Node
	// KubeletAPI is where and how to serve the kubelet API: on 127.0.0.1,
	// a free port, with a serving certificate of the cluster CA for that
	// address, and the cluster CA as the client CA (the API server's
	// kubelet client certificate is of it).
	KubeletAPI *agent.KubeletAPIConfig
	// Logger is Options.Logger named by the node.
	Logger logr.Logger
	// Masks are the host paths the node's pods must not see: the
	// cluster's directory, with its certificates, keys and kubeconfigs
	// (agent.Config.Masks).
	Masks []string
	// ClusterDNS and ClusterDomain are Options'.
	ClusterDNS    []netip.Addr
	ClusterDomain string
	// StageExecutable is the program the node's pods' sandbox stages and
	// log shims run (agent.Config.StageExecutable): Options.StageExecutable,
	// or the one Start built; "" with Options.OwnStageExecutable.
	StageExecutable string
}

// DefaultAgent returns podkit's agent (package agent) over the process
// runtime, serving the kubelet API, with no heartbeat of its own (the
// harness beats for it), its pods sandboxed where the machine allows it
// and on the node's pod network: a bridge of the node's own, addresses
// from its spec.podCIDR (agent.Config.PodCIDRFromNode). Its pods' sandbox
// stages and log shims run NodeEnv.StageExecutable.
func DefaultAgent(env NodeEnv) (Agent, error) {
	return agent.New(DefaultAgentConfig(env))
}

// DefaultAgentConfig is DefaultAgent's configuration, for a NewAgent that
// changes a field or two of it.
func DefaultAgentConfig(env NodeEnv) agent.Config {
	return agent.Config{
		Client:               env.Client,
		NodeName:             env.Name,
		StateDir:             env.StateDir,
		Node:                 env.Node,
		KubeletAPI:           env.KubeletAPI,
		HeartbeatInterval:    -1,
		HousekeepingInterval: DefaultHousekeepingInterval,
		Logger:               env.Logger,
		Masks:                env.Masks,
		PodCIDRFromNode:      true,
		ClusterDNS:           env.ClusterDNS,
		ClusterDomain:        env.ClusterDomain,
		StageExecutable:      env.StageExecutable,
	}
}

// HollowAgent returns podkit's agent over the hollow runtime
// (agent.RuntimeHollow): DefaultAgent's configuration, but no pod runs a
// process. Each pod goes through the agent's engine, status writes and
// events as on DefaultAgent, and gets an address of the Node's
// spec.podCIDR in its status; its containers only pretend to run. It is
// the hollow node of Kubernetes' scalability tests (kubemark): give it as
// Options.NewAgent to run a hundred nodes on one machine.
func HollowAgent(env NodeEnv) (Agent, error) {
	cfg := DefaultAgentConfig(env)
	cfg.Runtime = agent.RuntimeHollow
	return agent.New(cfg)
}
