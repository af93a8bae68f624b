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

	"go.etcd.io/etcd/server/v3/embed"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podkit/podkit/examples/kube"
	"github.com/podkit/podkit/examples/kube/agent"
)

// AdminUser is the administrator of the cluster (group system:masters):
// the identity of Admin, Kubeconfig, the scheduler and the controller
// manager.
const AdminUser = "podkit-admin"

// errClosed is returned by the methods of a closed cluster.
var errClosed = errors.New("clustertest: the cluster is closed")

// Cluster is a Kubernetes control plane (etcd, kube-apiserver,
// kube-scheduler, kube-controller-manager) running in this process, with
// podkit nodes. Create it with Start and end it with Close. Its methods are
// safe for concurrent use.
type Cluster struct {
	opts      Options
	dir       string
	removeDir bool
	ca        *authority

	etcd      *embed.Etcd
	apiserver *runningServer
	scheduler *runningServer
	kcm       *runningServer

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
// account exists). ctx bounds the start only. On error, everything that
// was started is stopped again and the directory removed. Call Close when
// done.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, dir: opts.Dir}
	if c.dir == "" {
		c.dir, err = os.MkdirTemp("", "podkit-cluster-")
		if err != nil {
			return nil, fmt.Errorf("clustertest: %w", err)
		}
		c.removeDir = true
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	if opts.ControlPlaneLog != nil {
		redirectKlog(opts.ControlPlaneLog)
	}
	if err := c.startControlPlane(ctx); err != nil {
		return nil, err
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

// startControlPlane starts etcd, the API server, the scheduler and the
// controller manager, in that order.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	pki := filepath.Join(c.dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return fmt.Errorf("clustertest: %w", err)
	}
	var err error
	if c.ca, err = newAuthority(pki); err != nil {
		return fmt.Errorf("clustertest: the cluster CA: %w", err)
	}
	files := apiserverFiles{caFile: c.ca.certFile}
	serving, err := c.ca.servingCert("kube-apiserver", []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"})
	if err != nil {
		return err
	}
	if files.servingCert, files.servingKey, err = serving.write(pki, "apiserver"); err != nil {
		return err
	}
	// The kubelet client certificate is an administrator's, as kubeadm's
	// was: the agents' SubjectAccessReviews allow it everything.
	kubeletClient, err := c.ca.clientCert("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return err
	}
	if files.kubeletClientCert, files.kletKey, err = kubeletClient.write(pki, "apiserver-kubelet-client"); err != nil {
		return err
	}
	if files.serviceAccountKey, err = serviceAccountKey(pki); err != nil {
		return err
	}

	var etcdURL string
	if c.etcd, etcdURL, err = startEtcd(ctx, filepath.Join(c.dir, "etcd")); err != nil {
		return err
	}
	c.apiserver, err = startAPIServer(ctx, etcdURL, files, c.opts, func(host string) (kubernetes.Interface, error) {
		cfg, err := c.userConfig(host, AdminUser, "system:masters")
		if err != nil {
			return nil, err
		}
		c.adminConfig = cfg
		c.admin, err = kubernetes.NewForConfig(cfg)
		return c.admin, err
	})
	if err != nil {
		return err
	}
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	if err := WriteKubeconfig(c.kubeconfig, c.adminConfig); err != nil {
		return err
	}
	if c.scheduler, err = startScheduler(c.kubeconfig, c.opts.SchedulerFlags); err != nil {
		return err
	}
	if c.kcm, err = startControllerManager(c.kubeconfig, c.opts); err != nil {
		return err
	}
	return nil
}

// userConfig returns a client configuration for host that authenticates
// as user in groups, with a client certificate of the cluster CA.
func (c *Cluster) userConfig(host, user string, groups ...string) (*rest.Config, error) {
	cert, err := c.ca.clientCert(user, groups...)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.ca.certPEM,
			CertData: cert.certPEM,
			KeyData:  cert.keyPEM,
		},
		// Tests and controllers burst; the API server's own flow control
		// is what limits them.
		QPS:   1000,
		Burst: 2000,
	}, nil
}

// Admin returns a clientset with every right (system:masters).
func (c *Cluster) Admin() kubernetes.Interface { return c.admin }

// AdminConfig returns a copy of Admin's configuration.
func (c *Cluster) AdminConfig() *rest.Config { return rest.CopyConfig(c.adminConfig) }

// Kubeconfig returns the path of the administrator's kubeconfig file, for
// kubectl (KUBECONFIG=<path> kubectl get nodes).
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// Dir returns the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

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
	if err := opts.validate(); err != nil {
		return nil, err
	}
	n, err := c.addNode(opts)
	if err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx, n); err != nil {
		return nil, err
	}
	return n, nil
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
	stateDir := filepath.Join(c.dir, "nodes", opts.Name)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
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
			Logger: c.opts.Logger.WithName(opts.Name),
			Masks:  []string{c.dir},
		},
		newAgent: c.opts.NewAgent,
		beat:     &kube.NodeHeartbeat{Client: client, NodeName: opts.Name, Interval: c.opts.HeartbeatInterval},
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
// one second of grace, SIGKILL), then the controller manager, the scheduler, the API
// server and etcd, and removes the cluster's directory if Start made it. It
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
	errs = append(errs, StopPodProcesses(stateDirs...))
	for _, s := range []*runningServer{c.kcm, c.scheduler, c.apiserver} {
		if s != nil {
			if err := s.stop(); err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, err)
			}
		}
	}
	if c.etcd != nil {
		c.etcd.Close()
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
