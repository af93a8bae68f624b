package virtualkubelet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	vke2e "github.com/virtual-kubelet/virtual-kubelet/test/e2e"

	"github.com/podkit/podkit/examples/kube/clustertest"
)

// The virtual nodes the suite tests: virtual-kubelet's own program with
// its mock provider, and a node with podkit's provider.
const (
	e2eMockNode   = "vk-mock"
	e2ePodkitNode = "vk-podkit"
)

// TestVirtualKubeletE2ESuite runs virtual-kubelet's importable e2e suite
// (github.com/virtual-kubelet/virtual-kubelet/test/e2e at the version
// go.mod requires: unmodified, nothing skipped) in one real cluster
// (clustertest's control plane), first against virtual-kubelet's own
// program with its mock provider, the reference, then against a
// virtual-kubelet node built with virtual-kubelet's nodeutil whose
// provider is podkit's over simcloud. Both must pass every test of the
// suite. The two run one after the other: the suite keeps its framework
// in a package variable, and both nodes serve at the kubelet's port (the
// suite reads stats through https:<node>:10250).
//
// It skips, saying why, where the control plane or virtual-kubelet's
// program cannot be built here, or in -short.
func TestVirtualKubeletE2ESuite(t *testing.T) {
	if testing.Short() {
		t.Skip("virtualkubelet: starts a real control plane; not in -short")
	}
	mock := mockAgent{binary: buildMock(t), log: &lockedBuffer{}}
	podkit := podkitNode(nodeOptions{qps: 50, burst: 100})
	var c *vkCluster
	c = startCluster(t, func(env clustertest.NodeEnv) (clustertest.Agent, error) {
		if env.Name == e2eMockNode {
			m := mock
			m.kubeconfig, m.env = c.Kubeconfig(), env
			return m, nil
		}
		return podkit(env)
	})
	t.Run("mock", func(t *testing.T) {
		n := c.addVirtualNode(t, e2eMockNode)
		t.Cleanup(func() {
			require.NoError(t, n.StopAgent(), "stopping virtual-kubelet's mock provider")
			if t.Failed() {
				t.Logf("virtual-kubelet (mock) output:\n%s", mock.log.String())
			}
		})
		c.addNodePod(t, "default", e2eMockNode)
		runSuite(t, c, e2eMockNode)
	})
	t.Run("podkit", func(t *testing.T) {
		c.addVirtualNode(t, e2ePodkitNode)
		c.addNodePod(t, "default", e2ePodkitNode)
		runSuite(t, c, e2ePodkitNode)
	})
}

// runSuite runs virtual-kubelet's e2e suite against node, with a minute
// for each condition it waits for (its default is two).
func runSuite(t *testing.T, c *vkCluster, node string) {
	vke2e.NewEndToEndTestSuite(vke2e.EndToEndTestSuiteConfig{
		Kubeconfig:   c.Kubeconfig(),
		Namespace:    "default",
		NodeName:     node,
		WatchTimeout: time.Minute,
	}).Run(t)
}
