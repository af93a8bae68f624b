package virtualkubelet_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podkit/podkit/examples/kube/clustertest"
	vk "github.com/podkit/podkit/examples/virtualkubelet"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
)

// kubeletPort is where a virtual node serves the kubelet API. It is the
// kubelet's port, and fixed: virtual-kubelet's e2e suite reads stats
// through the pod proxy at https:<node name>:10250 (the suite expects the
// virtual-kubelet to run as a pod named after its node).
const kubeletPort = 10250

// envControlPlane names a podkit-controlplane binary to use instead of
// building one from examples/kube (clustertest.BuildControlPlane).
const envControlPlane = "PODKIT_CONTROLPLANE"

// vkCluster is a real control plane (clustertest's: etcd, kube-apiserver
// with Node,RBAC authorization and NodeRestriction, scheduler,
// controller-manager, in a child process) with one virtual-kubelet node
// running in this process.
type vkCluster struct {
	*clustertest.Cluster
	ip net.IP
}

// startCluster starts the control plane, or skips the test, with a clear
// message, when the API server cannot be had here (no go command to build
// it, no examples/kube source, a build that fails, no global unicast
// address for the pod proxy).
func startCluster(t testing.TB, newAgent func(clustertest.NodeEnv) (clustertest.Agent, error)) *vkCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("virtualkubelet: starts a real control plane; not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	binary := os.Getenv(envControlPlane)
	if binary == "" {
		var err error
		if binary, err = clustertest.BuildControlPlane(ctx, nil); err != nil {
			t.Skipf("virtualkubelet: no API server binary can be had here (set %s to a podkit-controlplane binary): %v", envControlPlane, err)
		}
	} else if _, err := os.Stat(binary); err != nil {
		t.Skipf("virtualkubelet: %s=%s: %v", envControlPlane, binary, err)
	}
	ip := hostIP()
	if ip == nil {
		t.Skip("virtualkubelet: no global unicast IPv4 address: the API server's proxy refuses loopback addresses")
	}
	c, err := clustertest.Start(ctx, clustertest.Options{
		ControlPlane: binary,
		NodeIP:       ip,
		NewAgent:     newAgent,
		// virtual-kubelet renews its Lease every 10s: the kubelet's grace.
		NodeMonitorGracePeriod: 50 * time.Second,
		PodEvictionSeconds:     300,
	})
	require.NoError(t, err, "starting the control plane")
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return &vkCluster{Cluster: c, ip: ip}
}

func hostIP() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.To4()
		}
	}
	return nil
}

// addVirtualNode lets the node's identity read what virtual-kubelet's pod
// controller watches beyond what the Node authorizer grants (every secret
// and config map: virtual-kubelet resolves env references itself, as its
// Helm chart's ClusterRole allows), adds the node (whose agent
// Options.NewAgent builds), stops the harness's own heartbeat
// (virtual-kubelet's node controller keeps the Node and its Lease), and
// returns the node.
func (c *vkCluster) addVirtualNode(t testing.TB, name string) *clustertest.Node {
	t.Helper()
	ctx := context.Background()
	admin := c.Admin()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "virtual-kubelet-" + name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"},
			Verbs: []string{"get", "list", "watch"},
		}},
	}
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:node:" + name}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	n, err := c.AddNode(ctx, clustertest.NodeOptions{Name: name})
	require.NoError(t, err, "adding virtual node %s", name)
	n.StopHeartbeat()
	return n
}

// addNodePod makes the pod virtual-kubelet's e2e suite expects its node
// to run as: named after the node, in namespace, with the node's address,
// for the pod proxy (pods/https:<node>:10250/proxy/stats/summary). It is
// bound to a Node of its own that nothing runs on, and tolerates every
// taint, so that nothing evicts or runs it.
func (c *vkCluster) addNodePod(t testing.TB, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	admin := c.Admin()
	host := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-host"},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: "podkit.io/no-pods", Effect: v1.TaintEffectNoSchedule}}},
	}
	_, err := admin.CoreV1().Nodes().Create(ctx, host, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1.PodSpec{
			NodeName:    host.Name,
			Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}},
			Containers:  []v1.Container{{Name: "virtual-kubelet", Image: "virtual-kubelet"}},
		},
	}
	pod, err = admin.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	pod.Status.Phase = v1.PodRunning
	pod.Status.PodIP = c.ip.String()
	pod.Status.PodIPs = []v1.PodIP{{IP: c.ip.String()}}
	_, err = admin.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// nodeOptions configure a virtual-kubelet node of the harness.
type nodeOptions struct {
	// qps and burst set the node's client limits; 0: client-go's.
	qps   float32
	burst int
	// wrap, when set, wraps the node's client transport (rest.Config's
	// WrapTransport): the scale benchmark counts requests with it.
	wrap func(http.RoundTripper) http.RoundTripper
	// workers is virtual-kubelet's pod sync workers; 8 when 0.
	workers int
	// queue is the bucket of virtual-kubelet's pod controller queues; its
	// zero value leaves virtual-kubelet's default.
	queue queueLimits
	// cloud configures the node's simcloud.
	cloud simcloud.Options
}

// podkitNode returns the agent of a virtual-kubelet node whose provider is
// podkit's, over a simcloud, built by virtual-kubelet's nodeutil as a
// provider author would, serving the kubelet API (virtual-kubelet's
// handlers) on the node's address at kubeletPort.
func podkitNode(o nodeOptions) func(clustertest.NodeEnv) (clustertest.Agent, error) {
	return func(env clustertest.NodeEnv) (clustertest.Agent, error) {
		var provider *vk.Provider
		newProvider := func(pc nodeutil.ProviderConfig) (nodeutil.Provider, error) {
			cloud, err := simcloud.New(o.cloud)
			if err != nil {
				return nil, err
			}
			provider, err = vk.New(cloud, vk.Options{Pods: pc.Pods, NodeName: env.Name})
			return provider, err
		}
		node, err := newVirtualNode(env, o, newProvider)
		if err != nil {
			return nil, err
		}
		return agentFunc(func(ctx context.Context) error {
			done := make(chan error, 1)
			go func() { done <- provider.Run(ctx) }()
			err := node.Run(ctx)
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				err = nil
			}
			return errors.Join(err, <-done)
		}), nil
	}
}

type agentFunc func(ctx context.Context) error

func (f agentFunc) Run(ctx context.Context) error { return f(ctx) }

// newVirtualNode builds a virtual-kubelet node for env with nodeutil: the
// node's identity as its client (with o's limits), its serving
// certificate, the Node's address and kubelet port, and virtual-kubelet's
// routes (nodeutil.AttachProviderRoutes). The API server's requests carry
// a client certificate of the cluster CA, which is checked; requests
// without one (the pod proxy's) are served too: the harness does not
// authorize (nodeutil.WebhookAuth would, for a real deployment).
func newVirtualNode(env clustertest.NodeEnv, o nodeOptions, newProvider func(nodeutil.ProviderConfig) (nodeutil.Provider, error)) (*nodeutil.Node, error) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = o.qps, o.burst
	if o.wrap != nil {
		cfg.Wrap(o.wrap)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(env.KubeletAPI.ClientCA) {
		return nil, errors.New("no client CA")
	}
	ip := env.KubeletAPI.Address
	mux := http.NewServeMux()
	return nodeutil.NewNode(env.Name, func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		p, err := newProvider(pc)
		return p, nil, err
	}, nodeutil.WithClient(client), nodeutil.AttachProviderRoutes(mux), func(nc *nodeutil.NodeConfig) error {
		nc.HTTPListenAddr = net.JoinHostPort(ip.String(), strconv.Itoa(kubeletPort))
		nc.Handler = api.InstrumentHandler(mux)
		nc.TLSConfig = &tls.Config{
			Certificates: []tls.Certificate{env.KubeletAPI.Certificate},
			ClientCAs:    pool,
			ClientAuth:   tls.VerifyClientCertIfGiven,
			MinVersion:   tls.VersionTLS12,
		}
		nc.NumWorkers = cmp.Or(o.workers, 8)
		if o.queue.qps > 0 {
			nc.PodControllerConfigOpts = append(nc.PodControllerConfigOpts, func(pc *node.PodControllerConfig) error {
				pc.SyncPodsFromKubernetesRateLimiter = o.queue.limiter()
				pc.DeletePodsFromKubernetesRateLimiter = o.queue.limiter()
				pc.SyncPodStatusFromProviderRateLimiter = o.queue.limiter()
				return nil
			})
		}
		nc.InformerResyncPeriod = time.Minute
		// The Node authorizer's NodeRestriction refuses the kubernetes.io/
		// labels virtual-kubelet sets by default (kubernetes.io/role).
		nc.NodeSpec.Labels = map[string]string{"type": "virtual-kubelet", v1.LabelHostname: env.Name}
		nc.NodeSpec.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip.String()}}
		nc.NodeSpec.Status.DaemonEndpoints.KubeletEndpoint.Port = kubeletPort
		nc.NodeSpec.Status.Capacity = v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("1000"),
			v1.ResourceMemory: resource.MustParse("4Ti"),
			v1.ResourcePods:   resource.MustParse("10000"),
		}
		nc.NodeSpec.Status.Allocatable = nc.NodeSpec.Status.Capacity.DeepCopy()
		return nil
	})
}
