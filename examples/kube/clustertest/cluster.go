package clustertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/csrapprover"
	"github.com/podkit/podkit/examples/kube/internal/background"
	"github.com/podkit/podkit/examples/kube/internal/controlplane"
	"github.com/podkit/podkit/examples/kube/nodestatus"
)

// AdminUser is the administrator of the cluster (group system:masters):
// the identity of Admin and Kubeconfig.
const AdminUser = "podkit-admin"

// errClosed is returned by the methods of a closed cluster.
var errClosed = errors.New("clustertest: the cluster is closed")

// Cluster is a Kubernetes control plane (etcd, kube-apiserver,
// kube-scheduler, kube-controller-manager, in a child process) with podkit
// nodes running in this process. Create it with Start and end it with
// Close. Its methods are safe for concurrent use.
type Cluster struct {
	opts      Options
	dir       string
	removeDir bool
	ca        *authority

	controlPlane *controlPlane
	// approver approves the nodes' serving CSRs (package csrapprover),
	// which the controller manager signs but does not approve.
	approver *background.Task
	// metrics is metrics-server, when Options.MetricsServer.
	metrics *metricsServer

	adminConfig *rest.Config
	admin       kubernetes.Interface
	kubeconfig  string

	mu     sync.Mutex
	nodes  []*Node
	closed bool
}

// Start starts a cluster as opts says and returns once its nodes are Ready
// and schedulable (the node lifecycle controller has lifted the not-ready
// taint) and pods can be created in the default namespace (its service
// account exists). Unless Options.ControlPlane names a binary, it first
// builds the control plane program (BuildControlPlane: minutes the first
// time on a machine, seconds later). ctx bounds the start only. On error,
// everything that was started is stopped again and the directory removed.
// Call Close when done.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	binary := opts.ControlPlane
	if binary == "" {
		if binary, err = BuildControlPlane(ctx, opts.ControlPlaneLog); err != nil {
			return nil, err
		}
	}
	if opts.StageExecutable == "" && !opts.OwnStageExecutable {
		if opts.StageExecutable, err = BuildStages(ctx, opts.ControlPlaneLog); err != nil {
			return nil, err
		}
	}
	c := &Cluster{opts: opts, dir: opts.Dir}
	if c.dir == "" {
		c.dir, err = os.MkdirTemp("", "podkit-cluster-")
		if err != nil {
			return nil, fmt.Errorf("clustertest: %w", err)
		}
		c.removeDir = true
	} else if err := os.MkdirAll(c.dir, privateDir); err != nil {
		return nil, fmt.Errorf("clustertest: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	if err := c.startControlPlane(ctx, binary); err != nil {
		return nil, err
	}
	if err := c.createBootstrapRBAC(ctx); err != nil {
		return nil, err
	}
	approver := &csrapprover.Approver{Client: c.admin, Logger: opts.Logger.WithName("csrapprover")}
	c.approver = background.Go(approver.Run)
	if opts.MetricsServer {
		metricsBinary := opts.MetricsServerBinary
		if metricsBinary == "" {
			if metricsBinary, err = BuildMetricsServer(ctx, opts.ControlPlaneLog); err != nil {
				return nil, err
			}
		}
		if c.metrics, err = c.startMetricsServer(ctx, metricsBinary, filepath.Join(c.dir, controlPlaneDirName)); err != nil {
			return nil, err
		}
	}
	for _, n := range opts.Nodes {
		if _, err := c.addNode(n); err != nil {
			return nil, err
		}
	}
	if err := c.waitReady(ctx, c.Nodes()...); err != nil {
		return nil, err
	}
	return c, nil
}

// startControlPlane writes the control plane's files and runs binary, the
// podkit-controlplane program, on them.
func (c *Cluster) startControlPlane(ctx context.Context, binary string) error {
	dir := filepath.Join(c.dir, controlPlaneDirName)
	if err := os.MkdirAll(dir, privateDir); err != nil {
		return fmt.Errorf("clustertest: %w", err)
	}
	files := controlplane.FilesIn(dir)
	// The API server's port is this listener's, chosen by the kernel and
	// handed to the program: no other process can take it meanwhile, and
	// every kubeconfig names it before the program starts.
	listener, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return fmt.Errorf("clustertest: listening for the API server: %w", err)
	}
	host := "https://" + listener.Addr().String()
	if err := c.writeControlPlaneFiles(files, host); err != nil {
		listener.Close()
		return err
	}
	if c.adminConfig, err = c.userConfig(host, AdminUser, "system:masters"); err != nil {
		listener.Close()
		return err
	}
	c.kubeconfig = files.AdminKubeconfig
	if err := WriteKubeconfig(c.kubeconfig, c.adminConfig); err != nil {
		listener.Close()
		return err
	}
	if c.admin, err = kubernetes.NewForConfig(c.adminConfig); err != nil {
		listener.Close()
		return fmt.Errorf("clustertest: %w", err)
	}
	c.controlPlane, err = runControlPlane(ctx, binary, dir, listener, c.opts.ControlPlaneLog, c.opts.componentFlags())
	return err
}

// Admin returns a clientset with every right (AdminUser, group
// system:masters).
func (c *Cluster) Admin() kubernetes.Interface { return c.admin }

// AdminConfig returns a copy of Admin's configuration.
func (c *Cluster) AdminConfig() *rest.Config { return rest.CopyConfig(c.adminConfig) }

// StageExecutable is the program the nodes' pods' sandbox stages run
// (NodeEnv.StageExecutable): for an agent the caller starts itself, such
// as the podkit-agent command (--stage-executable). It is "" with
// Options.OwnStageExecutable.
func (c *Cluster) StageExecutable() string { return c.opts.StageExecutable }

// Kubeconfig returns the path of the administrator's kubeconfig file, for
// kubectl (KUBECONFIG=<path> kubectl get nodes). It holds the
// administrator's key: it is readable by its owner only.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// Dir returns the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

// EtcdURL returns the client URL of the cluster's etcd. It takes only
// mutual-TLS clients with a certificate of an etcd CA that signs nothing
// but etcd's own certificate and the API server's client: a test may check
// that every other client is refused.
func (c *Cluster) EtcdURL() string { return c.controlPlane.status.Etcd }

// Version returns the Kubernetes version the control plane reports
// (kubectl version's server version).
func (c *Cluster) Version() string { return c.controlPlane.status.Version }

// NodeConfig returns a client configuration that acts as the node name
// (system:node:<name>, group system:nodes), for an agent the harness does
// not run, such as the podkit-agent command; WriteKubeconfig writes it for
// one. The node need not exist yet.
func (c *Cluster) NodeConfig(name string) (*rest.Config, error) {
	if name == "" {
		return nil, errors.New("clustertest: NodeConfig: no node name")
	}
	return c.userConfig(c.adminConfig.Host, "system:node:"+name, "system:nodes")
}

// Nodes returns the nodes, in the order they were added.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

// Node returns the node named name, or nil.
func (c *Cluster) Node(name string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.Name() == name {
			return n
		}
	}
	return nil
}

// AddNode adds a podkit node, starts its agent and heartbeat, and returns
// it once it is Ready and schedulable.
func (c *Cluster) AddNode(ctx context.Context, opts NodeOptions) (*Node, error) {
	nodes, err := c.AddNodes(ctx, opts)
	if err != nil {
		return nil, err
	}
	return nodes[0], nil
}

// AddNodes adds podkit nodes, starts all their agents and heartbeats at
// once, and returns the nodes, in the order given, once every one is
// Ready and schedulable: for a hundred nodes, one wait instead of a
// hundred in a row. Each node is an agent of its own, with its own
// client, informers and state directory, as with AddNode. Nothing is
// added when an option is bad (an invalid or repeated name); a node that
// fails to start stops the adding there, and the nodes added before it
// stay in the cluster (Close stops them).
func (c *Cluster) AddNodes(ctx context.Context, opts ...NodeOptions) ([]*Node, error) {
	if len(opts) == 0 {
		return nil, errors.New("clustertest: AddNodes: no nodes")
	}
	seen := make(map[string]bool, len(opts))
	for _, o := range opts {
		if err := o.validate(); err != nil {
			return nil, err
		}
		if seen[o.Name] {
			return nil, fmt.Errorf("clustertest: two nodes are named %q", o.Name)
		}
		seen[o.Name] = true
	}
	nodes := make([]*Node, 0, len(opts))
	for _, o := range opts {
		n, err := c.addNode(o)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	if err := c.waitReady(ctx, nodes...); err != nil {
		return nil, err
	}
	return nodes, nil
}

// addNode creates the node's identity, certificates and state directory,
// and starts its agent and heartbeat.
func (c *Cluster) addNode(opts NodeOptions) (*Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	for _, n := range c.nodes {
		if n.Name() == opts.Name {
			return nil, fmt.Errorf("clustertest: a node named %q exists", opts.Name)
		}
	}
	cfg, err := c.userConfig(c.adminConfig.Host, "system:node:"+opts.Name, "system:nodes")
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "podkit-agent/" + opts.Name
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	nodes := filepath.Join(c.dir, nodesDirName)
	if err := os.MkdirAll(nodes, privateDir); err != nil {
		return nil, fmt.Errorf("clustertest: %w", err)
	}
	stateDir := filepath.Join(nodes, opts.Name)
	if err := os.MkdirAll(stateDir, privateDir); err != nil {
		return nil, fmt.Errorf("clustertest: %w", err)
	}
	serving, err := c.ca.servingCert(opts.Name, []net.IP{c.opts.NodeIP, net.IPv4(127, 0, 0, 1)}, []string{opts.Name, "localhost"})
	if err != nil {
		return nil, err
	}
	cert, err := serving.tls()
	if err != nil {
		return nil, err
	}
	node := agent.NodeObject(opts.Name)
	for k, v := range opts.Labels {
		node.Labels[k] = v
	}
	node.Spec.Taints = slices.Clone(opts.Taints)
	n := &Node{
		env: NodeEnv{
			Name:     opts.Name,
			Client:   client,
			Config:   cfg,
			StateDir: stateDir,
			Node:     node,
			KubeletAPI: &agent.KubeletAPIConfig{
				Address:     c.opts.NodeIP,
				Certificate: cert,
				ClientCA:    c.ca.certPEM,
			},
			Logger:          c.opts.Logger.WithName(opts.Name),
			Masks:           []string{c.dir},
			ClusterDNS:      c.opts.ClusterDNS,
			ClusterDomain:   c.opts.ClusterDomain,
			StageExecutable: c.opts.StageExecutable,
		},
		newAgent: c.opts.NewAgent,
		beat: &nodestatus.Heartbeat{
			Client: client, NodeName: opts.Name,
			Interval: c.opts.HeartbeatInterval, StatusReportInterval: c.opts.NodeStatusReportInterval,
		},
	}
	if err := n.StartAgent(); err != nil {
		return nil, err
	}
	n.ResumeHeartbeat()
	c.nodes = append(c.nodes, n)
	return n, nil
}

// Close stops the nodes (heartbeats, then agents), then every process of
// the pods the process runtime knows in their state directories (SIGTERM,
// one second of grace, SIGKILL: call Shutdown first to give pods their
// grace periods and preStop hooks), removes the nodes' pod networks
// (bridges, veths, network namespaces), then the control plane (the controller
// manager, the scheduler, the API server and etcd, in that order), and
// removes the cluster's directory if Start made it. It
// returns what failed on the way (an agent that stopped with an error,
// processes that would not die); everything is stopped regardless. Close
// may be called more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	nodes := slices.Clone(c.nodes)
	c.mu.Unlock()

	var errs []error
	var stateDirs []string
	for _, n := range nodes {
		n.StopHeartbeat()
	}
	for _, n := range nodes {
		errs = append(errs, n.StopAgent())
		stateDirs = append(stateDirs, n.StateDir())
	}
	errs = append(errs, StopPodProcesses(stateDirs...), removeNetworks(stateDirs))
	if c.metrics != nil {
		errs = append(errs, c.metrics.stop())
	}
	if c.approver != nil {
		errs = append(errs, c.approver.Stop())
	}
	if c.controlPlane != nil {
		errs = append(errs, c.controlPlane.stop())
	}
	if c.removeDir {
		errs = append(errs, removeAll(c.dir))
	}
	return errors.Join(errs...)
}

// nodeTaintedNotReady says whether node carries the taint the API server
// puts on new nodes, which the node lifecycle controller lifts once the
// node is Ready.
func nodeTaintedNotReady(node *v1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == v1.TaintNodeNotReady {
			return true
		}
	}
	return false
}

// removeTimeout bounds the removal of the cluster's directory.
const removeTimeout = 10 * time.Second

// removeAll removes dir, trying again while it fails: the closed runtimes
// of the stopped agents may still be recording the exits of the processes
// just killed.
func removeAll(dir string) error {
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.Now().Add(removeTimeout)
	for {
		err := os.RemoveAll(dir)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		<-ticker.C
	}
}
