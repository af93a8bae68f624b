package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"

	"github.com/podkit/podkit/examples/kube/nodestatus"
)

// Every test here talks to one real kube-apiserver over one real embedded
// etcd, started in this process (shared/APISERVER.md). They live in one
// test package, and run as parallel subtests of TestAPIServer, so the heavy
// server is compiled once and started once. Each subtest works on a node
// of its own.

// waitTimeout bounds every wait for the API server or the agent.
const waitTimeout = 60 * time.Second

// testNodes are the nodes the subtests use; each gets a bearer token.
var testNodes = []string{
	"mirror-node", "ident-a", "ident-b", "source-node", "writer-node",
	"lifecycle-node", "graceful-node", "force-node", "static-node", "restart-node", "reject-node", "cmd-node",
	"burst-node", "events-node", "sinkfail-node", "cond-node", "evict-node", "shutdown-node", "refusal-node", "sources-node",
	"hollow-node",
}

func TestAPIServer(t *testing.T) {
	c := startCluster(t, testNodes...)
	t.Run("MirrorClient", func(t *testing.T) { t.Parallel(); testMirrorClient(t, c) })
	t.Run("NodeIdentityRefusals", func(t *testing.T) { t.Parallel(); testNodeIdentityRefusals(t, c) })
	t.Run("APISource", func(t *testing.T) { t.Parallel(); testAPISource(t, c) })
	t.Run("StatusWriter", func(t *testing.T) { t.Parallel(); testStatusWriter(t, c) })
	t.Run("StatusWriterRefusals", func(t *testing.T) { t.Parallel(); testStatusWriterRefusals(t, c) })
	t.Run("AgentPodLifecycle", func(t *testing.T) { t.Parallel(); testAgentPodLifecycle(t, c) })
	t.Run("AgentGracefulDelete", func(t *testing.T) { t.Parallel(); testAgentGracefulDelete(t, c) })
	t.Run("AgentForceDelete", func(t *testing.T) { t.Parallel(); testAgentForceDelete(t, c) })
	t.Run("AgentStaticPod", func(t *testing.T) { t.Parallel(); testAgentStaticPod(t, c) })
	t.Run("AgentRestart", func(t *testing.T) { t.Parallel(); testAgentRestart(t, c) })
	t.Run("AgentRestartWaitsForItsSources", func(t *testing.T) { t.Parallel(); testAgentRestartWaitsForItsSources(t, c) })
	t.Run("AgentRejectsUnsupportedPod", func(t *testing.T) { t.Parallel(); testAgentRejects(t, c) })
	t.Run("Command", func(t *testing.T) { t.Parallel(); testCommand(t, c) })
	t.Run("FinalStatusBurst", func(t *testing.T) { t.Parallel(); testFinalStatusBurst(t, c) })
	t.Run("AgentEvents", func(t *testing.T) { t.Parallel(); testAgentEvents(t, c) })
	t.Run("EventSinkFailure", func(t *testing.T) { t.Parallel(); testEventSinkFailure(t, c) })
	t.Run("AgentConditions", func(t *testing.T) { t.Parallel(); testAgentConditions(t, c) })
	t.Run("AgentEviction", func(t *testing.T) { t.Parallel(); testAgentEviction(t, c) })
	t.Run("AgentShutdown", func(t *testing.T) { t.Parallel(); testAgentShutdown(t, c) })
	t.Run("HollowAgentPodLifecycle", func(t *testing.T) { t.Parallel(); testHollowAgentPodLifecycle(t, c) })
}

// cluster is a real kube-apiserver over a real embedded etcd, running in the
// test process. It authorizes with Node,RBAC and runs the NodeRestriction
// admission plugin, so an agent given a node's credentials is held to
// exactly what a kubelet may do.
type cluster struct {
	// admin is a client with full rights (system:masters).
	admin *kubernetes.Clientset
	// adminConfig is admin's configuration.
	adminConfig *rest.Config
	// tokens maps a node name to the bearer token of system:node:<name>.
	tokens map[string]string
}

// startCluster starts etcd and kube-apiserver for the rest of t, with a
// bearer token for each node name in nodes. Both stop when t ends.
func startCluster(t *testing.T, nodes ...string) *cluster {
	t.Helper()
	c := &cluster{tokens: make(map[string]string)}
	var lines []string
	for i, n := range nodes {
		tok := fmt.Sprintf("node-token-%d-%s", i, n)
		c.tokens[n] = tok
		// token,user,uid,"group1,group2"
		lines = append(lines, fmt.Sprintf("%s,system:node:%s,node-uid-%d,\"system:nodes\"", tok, n, i))
	}
	tokenFile := filepath.Join(t.TempDir(), "tokens.csv")
	require.NoError(t, os.WriteFile(tokenFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	start := time.Now()
	etcd := testserver.RunEtcd(t, nil)
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = etcd.Endpoints()
	srv := kubeapiservertesting.StartTestServerOrDie(t, nil, []string{
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
		"--enable-admission-plugins=NodeRestriction",
		"--authorization-mode=Node,RBAC",
		"--token-auth-file=" + tokenFile,
	}, storage)
	t.Cleanup(srv.TearDownFn)
	t.Logf("etcd and kube-apiserver ready in %v", time.Since(start).Round(time.Millisecond))

	c.adminConfig = rest.CopyConfig(srv.ClientConfig)
	c.admin = kubernetes.NewForConfigOrDie(c.adminConfig)
	return c
}

// nodeConfig returns a client configuration that authenticates as
// system:node:<node> (group system:nodes) and nothing else.
func (c *cluster) nodeConfig(t *testing.T, node string) *rest.Config {
	t.Helper()
	tok, ok := c.tokens[node]
	require.True(t, ok, "no token for node %q: add it to testNodes", node)
	cfg := rest.AnonymousClientConfig(c.adminConfig)
	cfg.BearerToken = tok
	return cfg
}

// nodeClient returns a clientset acting as system:node:<node>.
func (c *cluster) nodeClient(t *testing.T, node string) *kubernetes.Clientset {
	t.Helper()
	return kubernetes.NewForConfigOrDie(c.nodeConfig(t, node))
}

// registerNode registers the Node node as the node itself would, and
// returns it.
func (c *cluster) registerNode(t *testing.T, node string) *v1.Node {
	t.Helper()
	n, err := nodestatus.Register(context.Background(), c.nodeClient(t, node).CoreV1(),
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	require.NoError(t, err)
	return n
}

// testContext returns a context that ends when t ends or after
// waitTimeout.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// waitForPod polls the API server until cond holds for the pod (nil when it
// does not exist, or when cs is a node that may not read it yet: the Node
// authorizer learns of a pod's binding a moment after it is stored), and
// returns the pod it held for.
func waitForPod(t *testing.T, cs kubernetes.Interface, namespace, name, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var last *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
			p = nil
		case err != nil:
			return false, err
		}
		last = p
		return cond(p), nil
	})
	require.NoError(t, err, "waiting for pod %s/%s: %s; last seen: %s", namespace, name, what, describe(last))
	return last
}

// describe summarizes a pod for failure messages.
func describe(p *v1.Pod) string {
	if p == nil {
		return "<none>"
	}
	return fmt.Sprintf("uid=%s phase=%s deletionTimestamp=%v conditions=%v containers=%v",
		p.UID, p.Status.Phase, p.DeletionTimestamp, p.Status.Conditions, p.Status.ContainerStatuses)
}

// podUIDIs matches a pod object by UID.
func podUIDIs(uid types.UID) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool { return p != nil && p.UID == uid }
}
