package kube_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// TestClusterCommandKeepsTheUsersKubeconfig: --kubeconfig naming a file
// that exists (~/.kube/config, say) is refused before anything starts, and
// the file is left as it was; the command would otherwise overwrite it and
// remove it at exit.
func TestClusterCommandKeepsTheUsersKubeconfig(t *testing.T) {
	bin := buildOnce(t, "github.com/podkit/podkit/examples/kube/cmd/podkit-cluster")
	tmp := t.TempDir()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	const mine = "apiVersion: v1\nkind: Config\n# the user's own\n"
	require.NoError(t, os.WriteFile(kubeconfig, []byte(mine), 0o600))
	cmd := exec.Command(bin, "--nodes", "1", "--kubeconfig", kubeconfig)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "podkit-cluster refuses: %s", out)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, string(out), "--kubeconfig "+kubeconfig+" exists")
	got, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	assert.Equal(t, mine, string(got), "the user's kubeconfig is untouched")
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing was started or left in TMPDIR")
}

// TestClusterCommand runs the podkit-cluster command as a user does: it
// prints a kubeconfig kubectl works with (the server's version is the
// Kubernetes release it is built from, 3 Ready nodes, a pod's log,
// kubectl top from the metrics-server it runs by default), says
// how the pods are contained, and on Ctrl-C (SIGINT) stops every pod's process, removes its temporary
// directory and its kubeconfig, and exits 0.
func TestClusterCommand(t *testing.T) {
	bin := buildOnce(t, "github.com/podkit/podkit/examples/kube/cmd/podkit-cluster")
	// The command builds the control plane (clustertest.BuildControlPlane)
	// before it starts: built here first (the command, built with the same
	// -race as this test, finds it up to date), its start is not delayed
	// by a build of minutes.
	_, err := clustertest.BuildControlPlane(testContextFor(t, 30*time.Minute), nil)
	require.NoError(t, err)
	// So is metrics-server, which it runs by default.
	buildMetricsServer(t, nil)
	tmp := t.TempDir() // the command's TMPDIR: it must be empty again at the end
	kubeconfig := filepath.Join(t.TempDir(), "podkit.kubeconfig")
	cmd := exec.Command(bin, "--nodes", "3", "--kubeconfig", kubeconfig)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	out := &syncBuffer{}
	go func() {
		_, _ = io.Copy(out, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(clusterTimeout):
		}
		t.Logf("podkit-cluster wrote:\n%s", out.String())
	})
	cli := &background{cmd: cmd, out: out, done: exited}
	printed := cli.waitOutput(t, "Cluster ready", "export KUBECONFIG="+kubeconfig, "Press Ctrl-C")
	// It says what it chose for the pods: their containment, and that
	// what reaches the host is refused.
	cli.waitOutput(t, "Pods on node-", "(every node alike): ", "are refused: HostAccessNotAllowed.")

	k := &kubectl{bin: buildOnce(t, kubectlPackage), kubeconfig: kubeconfig, home: t.TempDir()}
	var version struct {
		ServerVersion struct{ GitVersion string }
	}
	require.NoError(t, json.Unmarshal([]byte(k.run(t, "version", "-o", "json")), &version))
	assert.Equal(t, kubernetesVersion(t), version.ServerVersion.GitVersion, "kubectl version: the server's version")
	nodes := k.run(t, "get", "nodes", "--no-headers")
	assert.Len(t, regexp.MustCompile(`(?m)^node-\d +Ready `).FindAllString(nodes, -1), 3, "3 Ready nodes:\n%s", nodes)
	k.run(t, "run", "hello", "--image=none", "--restart=Never", "--command", "--", "/bin/sh", "-c", "echo hello; exec sleep 3600")
	cli.waitOutput(t, "pod/default/hello", "Running")
	assert.Equal(t, "hello\n", k.run(t, "logs", "hello"))
	uids := map[string]bool{strings.TrimSpace(k.run(t, "get", "pod", "hello", "-o", "jsonpath={.metadata.uid}")): true}
	// kubectl top answers, from the metrics-server it runs by default
	// (testKubectlTop checks the figures).
	require.NoError(t, wait.PollUntilContextTimeout(testContextFor(t, clusterTimeout), time.Second, clusterTimeout, true, func(context.Context) (bool, error) {
		out, _, err := k.try(t, "top", "pod", "hello")
		return err == nil && len(parseTop(out)) == 1, nil
	}), "kubectl top pod hello answers")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		exited <- err
		require.NoError(t, err, "podkit-cluster exits 0 on Ctrl-C")
	case <-time.After(clusterTimeout):
		t.Fatal("podkit-cluster did not exit on Ctrl-C")
	}
	assert.Contains(t, out.String(), "Stopped.")
	procs, err := processruntime.ScanProcesses(func(uid string) bool { return uids[uid] })
	require.NoError(t, err)
	assert.Empty(t, procs, "no pod process outlives the command")
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, entries, "the command's temporary directory is removed")
	assert.NoFileExists(t, kubeconfig, "the kubeconfig is removed")
	assert.Contains(t, printed, "kubectl run hello")
}

// kubernetesVersion returns the version of k8s.io/kubernetes this module
// requires (v1.37.2). A test binary's build information lists no modules:
// go list says.
func kubernetesVersion(t *testing.T) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes").Output()
	require.NoError(t, err)
	v := strings.TrimSpace(string(out))
	require.True(t, strings.HasPrefix(v, "v1."), "k8s.io/kubernetes at %q", v)
	return v
}
