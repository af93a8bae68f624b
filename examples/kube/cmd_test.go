package kube_test

import (
	"context"
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

	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// stagesPackage is processruntime's cmd/podkit-stages.
const stagesPackage = "github.com/podkit/podkit/examples/nodeagent/processruntime/cmd/podkit-stages"

// testCommand builds cmd/podkit-agent, with cmd/podkit-stages beside it,
// and runs it as its own process, with a kubeconfig for its node
// identity: it runs its pods' stages from podkit-stages; a pod created for the node succeeds;
// the agent exits cleanly on SIGTERM, leaving its pods running; the next
// agent adopts them, and `podkit-agent shutdown` shuts the node down,
// giving a pod the 3 seconds its SIGTERM trap needs, and ends the agent.
func testCommand(t *testing.T, c *cluster) {
	const node = "cmd-node"
	// Installed as the agent's doc says: podkit-stages beside the agent,
	// in a directory others may enter but not write.
	binDir := t.TempDir()
	require.NoError(t, os.Chmod(binDir, 0o755))
	bin := filepath.Join(binDir, "podkit-agent")
	// -race reuses the packages this test binary was built from (CI builds
	// with it), so only the link is new.
	args := []string{"build", "-buildvcs=false", "-o", binDir + "/"}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "./cmd/podkit-agent", stagesPackage)...).CombinedOutput()
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
	// needs --allow-host-access. The API server of these tests assigns no
	// spec.podCIDR: the agent is given a range.
	stateDir, podCIDR := t.TempDir(), nextTestPodCIDR().String()
	logs, err := os.Create(filepath.Join(t.TempDir(), "agent.log"))
	require.NoError(t, err)
	var agentCmd *exec.Cmd
	start := func() chan error {
		agentCmd = exec.Command(bin, "--kubeconfig", kubeconfig, "--node-name", node,
			"--state-dir", stateDir, "--housekeeping-interval", "100ms", "--allow-host-access",
			"--pod-cidr", podCIDR, "--shutdown-grace-period", "20s")
		agentCmd.Stdout, agentCmd.Stderr = logs, logs
		require.NoError(t, agentCmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- agentCmd.Wait() }()
		proc := agentCmd.Process
		t.Cleanup(func() {
			_ = proc.Kill()
			exited <- <-exited
		})
		return exited
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("podkit-agent output:\n%s", b)
		}
	})
	// After the agents' cleanups (registered later, so run first).
	t.Cleanup(func() {
		assert.NoError(t, clustertest.StopPodProcesses(stateDir))
		assert.NoError(t, processruntime.RemoveNetwork(context.Background(), stateDir))
	})
	exited := start()

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
	agentLog, err := os.ReadFile(logs.Name())
	require.NoError(t, err)
	assert.Contains(t, string(agentLog), "The pods' sandbox stages and log shims run podkit-stages",
		"--stage-executable auto found the podkit-stages beside the agent")

	// A pod whose SIGTERM trap needs 3 seconds.
	patient := apiPod("patient", node, "/bin/sh", "-c", `trap 'sleep 3; echo cleaned; exit 0' TERM; while true; do sleep 0.1; done`)
	patient.Spec.TerminationGracePeriodSeconds = new(int64(20))
	patient = createPod(t, c, patient)
	waitForPod(t, c.admin, "default", patient.Name, "Running", isPhase(v1.PodRunning))
	procs := mainProcesses(t, patient.UID)
	require.NotEmpty(t, procs)

	// SIGTERM ends the agent, not its pods.
	require.NoError(t, agentCmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		require.NoError(t, err, "podkit-agent exits cleanly on SIGTERM")
	case <-time.After(waitTimeout):
		t.Fatal("podkit-agent did not exit on SIGTERM")
	}
	assert.Equal(t, procs, mainProcesses(t, patient.UID), "the pod outlives the agent")

	// The next agent adopts it; `podkit-agent shutdown` shuts the node
	// down: the pod gets its 3 seconds, the agent exits.
	_, err = os.Stat(filepath.Join(stateDir, "shutdown.sock"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the agent removed its shutdown socket at exit")
	exited = start()
	waitForFile(t, filepath.Join(stateDir, "shutdown.sock"))
	fi, err := os.Stat(filepath.Join(stateDir, "shutdown.sock"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the shutdown socket is the agent's user's only")
	began := time.Now()
	out, err = exec.Command(bin, "shutdown", "--state-dir", stateDir).CombinedOutput()
	require.NoError(t, err, "podkit-agent shutdown: %s", out)
	assert.Contains(t, string(out), "1 pods stopped, 0 still stopping\nok\n")
	assert.GreaterOrEqual(t, time.Since(began), 3*time.Second, "the shutdown waited for the pod's trap")
	final := waitForPod(t, c.admin, "default", patient.Name, "Succeeded", isPhase(v1.PodSucceeded))
	assert.Equal(t, "Terminated", final.Status.Reason)
	select {
	case err := <-exited:
		exited <- err
		require.NoError(t, err, "podkit-agent exits cleanly after the node shutdown")
	case <-time.After(waitTimeout):
		t.Fatal("podkit-agent did not exit after the node shutdown")
	}
}
