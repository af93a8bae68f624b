package kube_test

import (
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

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// TestClusterCommand runs the podkit-cluster command as a user does: it
// prints a kubeconfig kubectl works with (3 Ready nodes, a pod's log), and
// on Ctrl-C (SIGINT) stops every pod's process, removes its temporary
// directory and its kubeconfig, and exits 0.
func TestClusterCommand(t *testing.T) {
	bin := buildOnce(t, "github.com/podkit/podkit/examples/kube/cmd/podkit-cluster")
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

	k := &kubectl{bin: buildOnce(t, "k8s.io/kubernetes/cmd/kubectl"), kubeconfig: kubeconfig, home: t.TempDir()}
	nodes := k.run(t, "get", "nodes", "--no-headers")
	assert.Len(t, regexp.MustCompile(`(?m)^node-\d +Ready `).FindAllString(nodes, -1), 3, "3 Ready nodes:\n%s", nodes)
	k.run(t, "run", "hello", "--image=none", "--restart=Never", "--command", "--", "/bin/sh", "-c", "echo hello; exec sleep 3600")
	cli.waitOutput(t, "pod/default/hello", "Running")
	assert.Equal(t, "hello\n", k.run(t, "logs", "hello"))
	uids := map[string]bool{strings.TrimSpace(k.run(t, "get", "pod", "hello", "-o", "jsonpath={.metadata.uid}")): true}

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
