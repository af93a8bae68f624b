package kube_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// testCommand builds cmd/podkit-agent and runs it as its own process, with
// a kubeconfig for its node identity: a pod created for the node succeeds,
// and the agent exits cleanly on SIGTERM.
func testCommand(t *testing.T, c *cluster) {
	const node = "cmd-node"
	bin := filepath.Join(t.TempDir(), "podkit-agent")
	// -race reuses the packages this test binary was built from (CI builds
	// with it), so only the link is new.
	args := []string{"build", "-buildvcs=false", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "./cmd/podkit-agent")...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	cfg := c.nodeConfig(t, node)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"test": {
			Server: cfg.Host, CertificateAuthority: cfg.CAFile, CertificateAuthorityData: cfg.CAData, TLSServerName: cfg.ServerName,
		}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{node: {Token: cfg.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"test": {Cluster: "test", AuthInfo: node}},
		CurrentContext: "test",
	}, kubeconfig))

	// The test's pod writes to a host directory: a hostPath volume, which
	// needs --allow-host-access.
	agentCmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--node-name", node,
		"--state-dir", t.TempDir(), "--housekeeping-interval", "100ms", "--allow-host-access")
	logs, err := os.Create(filepath.Join(t.TempDir(), "agent.log"))
	require.NoError(t, err)
	agentCmd.Stdout, agentCmd.Stderr = logs, logs
	require.NoError(t, agentCmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- agentCmd.Wait() }()
	t.Cleanup(func() {
		_ = agentCmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("podkit-agent output:\n%s", b)
		}
	})

	dir := t.TempDir()
	spec := apiPod("from-cmd", node, shell(dir, `echo ran > $D/out`)...)
	spec.Spec.Volumes = []v1.Volume{{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}}}
	spec.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "out", MountPath: dir}}
	require.NoError(t, os.Chmod(dir, 0o777), "the pod's root is not the host's")
	pod := createPod(t, c, spec)
	got := waitForPod(t, c.admin, "default", pod.Name, "Succeeded", func(p *v1.Pod) bool {
		select {
		case err := <-exited:
			exited <- err
			require.Fail(t, "podkit-agent exited early", "%v", err)
		default:
		}
		return isPhase(v1.PodSucceeded)(p)
	})
	assert.Equal(t, []string{"ran"}, lines(t, filepath.Join(dir, "out")))
	assert.Equal(t, v1.PodSucceeded, got.Status.Phase)

	require.NoError(t, agentCmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		require.NoError(t, err, "podkit-agent exits cleanly on SIGTERM")
	case <-time.After(waitTimeout):
		t.Fatal("podkit-agent did not exit on SIGTERM")
	}
}
