package kube_test

import "testing"

// TestCluster runs podkit nodes in a whole cluster (package clustertest):
// the real scheduler places the pods, the real controllers create and
// delete them, and kubectl drives it all. Each scenario is a parallel
// subtest with a pool of nodes and a namespace of its own (harness_test.go).
func TestCluster(t *testing.T) {
	h := startHarness(t)
	scenarios := []struct {
		name string
		run  func(*testing.T, *harness)
	}{
		{"Deployment", testDeployment},
		{"Job", testJob},
		{"DaemonSet", testDaemonSet},
		{"NodeFailure", testNodeFailure},
		{"NodeReregistration", testNodeReregistration},
		{"BootstrapJoin", testBootstrapJoin},
		{"AgentRestart", testClusterAgentRestart},
		{"Drain", testDrain},
		{"NamespaceDeletion", testNamespaceDeletion},
		{"Kubectl", testKubectl},
		{"Top", testKubectlTop},
		{"KubeletAPIAuth", testKubeletAPIAuth},
		{"Sessions", testSessions},
		{"DocManifests", testDocManifests},
		{"Metrics", testMetrics},
		{"FinalStatusBurst", testClusterFinalStatusBurst},
		{"Features", testFeatureManifests},
		{"Images", testImages},
		{"SidecarJob", testSidecarJob},
		{"EmptyDirSizeLimit", testEmptyDirSizeLimit},
		{"KeySearch", testKeySearch},
		{"ServiceLinks", testServiceLinks},
		{"ProbesAndHooks", testProbesAndHooks},
		{"SecretVolume", testSecretVolume},
		{"PodNetwork", testPodNetwork},
		{"GracefulNodeShutdown", testGracefulNodeShutdown},
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.run(t, h)
		})
	}
}
