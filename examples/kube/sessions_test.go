package kube_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/podkit/podkit/examples/kube/internal/terminaltest"
)

// sessionsPod is the pod the sessions scenario drives: "main" serves
// HTTP on its pod's loopback port 8080 and leaves a marker in its emptyDir
// at /data (its working directory); "echo" answers each line of its stdin.
func sessionsPod(pool string) *v1.Pod {
	spec := v1.PodSpec{
		Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		Containers: []v1.Container{{
			Name: "main", Image: "busybox",
			Command:      []string{"sh", "-c", `echo from-main > /data/marker; mkdir -p /tmp/www; echo pong > /tmp/www/index.html; exec busybox httpd -f -p 127.0.0.1:8080 -h /tmp/www`},
			WorkingDir:   "/data",
			Env:          []v1.EnvVar{{Name: "GREETING", Value: "hello from the spec"}},
			VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}, {
			Name: "echo", Image: "busybox", Stdin: true,
			Command: []string{"sh", "-c", `while read line; do echo "echo: $line"; done`},
		}},
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sessions"}, Spec: inPool(spec, pool)}
}

// testSessions drives kubectl exec (with and without -it, exit codes),
// cp both ways, port-forward, attach and debug -it through the API server
// against a podkit node running its pods in the process runtime's
// sandboxes, and reads the pod's figures in /stats/summary and
// /runningpods through the node proxy.
func testSessions(t *testing.T, h *harness) {
	requireBusybox(t)
	nodes := h.sandboxedPool(t, "sessions", 1)
	ns := h.namespace(t, "sessions")
	cs := h.c.Admin()
	ctx := testContextFor(t, clusterTimeout)
	_, err := cs.CoreV1().Pods(ns).Create(ctx, sessionsPod("sessions"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPods(t, cs, ns, "", "the sessions pod runs", func(pods []v1.Pod) bool {
		return len(pods) == 1 && pods[0].Status.Phase == v1.PodRunning && len(pods[0].Status.ContainerStatuses) == 2 &&
			pods[0].Status.ContainerStatuses[0].Ready && pods[0].Status.ContainerStatuses[1].Ready
	})
	k := h.kubectl
	n := []string{"-n", ns}

	t.Run("Exec", func(t *testing.T) {
		out := k.run(t, append(n, "exec", "sessions", "-c", "main", "--", "sh", "-c", `pwd; echo "$GREETING"; cat marker; echo err >&2`)...)
		assert.Equal(t, "/data\nhello from the spec\nfrom-main\n", out, "the container's working directory, env and volume")
		_, _, err := k.try(t, append(n, "exec", "sessions", "-c", "main", "--", "sh", "-c", "exit 3")...)
		var exitErr *exec.ExitError
		require.True(t, errors.As(err, &exitErr), "%v", err)
		assert.Equal(t, 3, exitErr.ExitCode(), "kubectl exits with the command's code")
		out, _ = k.runStdin(t, "typed on stdin\n", append(n, "exec", "-i", "sessions", "-c", "main", "--", "cat")...)
		assert.Equal(t, "typed on stdin\n", out)
		_, errOut, err := k.try(t, append(n, "exec", "sessions", "-c", "main", "--", "no-such-command")...)
		assert.Error(t, err)
		assert.Contains(t, errOut, `"no-such-command" not found`)
	})
	t.Run("ExecTTY", func(t *testing.T) {
		shown, code := k.runInTerminal(t, "size ", "hello\r", append(n, "exec", "-it", "sessions", "-c", "main", "--", "sh", "-c", `echo "size $(stty size)"; read line; echo "got $line"`)...)
		assert.Equal(t, 0, code, shown)
		assert.Contains(t, shown, "size 30 100", "the terminal's size reached the pod")
		assert.Contains(t, shown, "got hello")
	})
	t.Run("Copy", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "up.txt")
		content := strings.Repeat("a line copied into the pod\n", 1000)
		require.NoError(t, os.WriteFile(local, []byte(content), 0o600))
		k.run(t, append(n, "cp", "-c", "main", local, "sessions:/data/copied.txt")...)
		out := k.run(t, append(n, "exec", "sessions", "-c", "main", "--", "cat", "/data/copied.txt")...)
		assert.Equal(t, content, out, "into the pod")
		back := filepath.Join(t.TempDir(), "down.txt")
		k.run(t, append(n, "cp", "-c", "main", "sessions:/data/copied.txt", back)...)
		got, err := os.ReadFile(back)
		require.NoError(t, err)
		assert.Equal(t, content, string(got), "out of the pod")
	})
	t.Run("PortForward", func(t *testing.T) {
		pf := k.start(t, append(n, "port-forward", "--address", "127.0.0.1", "sessions", ":8080")...)
		out := pf.waitOutput(t, "Forwarding from 127.0.0.1:")
		m := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`).FindStringSubmatch(out)
		require.NotNil(t, m, out)
		for range 2 { // two connections through one session
			resp, err := http.Get("http://127.0.0.1:" + m[1] + "/")
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, "pong\n", string(body), "the pod's own loopback server")
		}
	})
	t.Run("Attach", func(t *testing.T) {
		a := k.startStdin(t, append(n, "attach", "-i", "sessions", "-c", "echo")...)
		_, err := a.stdin.Write([]byte("hi\n"))
		require.NoError(t, err)
		a.waitOutput(t, "echo: hi")
		a.stdin.Close()
		require.NoError(t, <-a.done, "the end of kubectl's input ends the session")
		out := k.run(t, append(n, "logs", "sessions", "-c", "echo")...)
		assert.Contains(t, out, "echo: hi", "the container's answers are logged too")
	})
	t.Run("DebugTTY", func(t *testing.T) {
		shown, code := k.runInTerminal(t, "command prompt", "hello\rquit\r", append(n, "debug", "-it", "sessions", "--image=busybox", "--target=main", "--container=debugger", "--",
			"sh", "-c", `while read line; do [ "$line" = quit ] && exit 0; echo "got $line, $(cat /data/marker)"; done`)...)
		assert.Equal(t, 0, code, shown)
		assert.Contains(t, shown, "got hello, from-main", "the debugger typed into, in its target's view")
		// The status writer reports the exit a moment after the session
		// ended.
		var es v1.ContainerStatus
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, clusterTimeout, true, func(ctx context.Context) (bool, error) {
			pod, err := cs.CoreV1().Pods(ns).Get(ctx, "sessions", metav1.GetOptions{})
			if err != nil || len(pod.Status.EphemeralContainerStatuses) != 1 {
				return false, nil
			}
			es = pod.Status.EphemeralContainerStatuses[0]
			return es.State.Terminated != nil, nil
		})
		require.NoError(t, err, "the debugger's status says it ended: %+v", es.State)
		assert.Equal(t, "debugger", es.Name)
		assert.Equal(t, int32(0), es.State.Terminated.ExitCode)
	})
	t.Run("Stats", func(t *testing.T) {
		raw := k.run(t, "get", "--raw", "/api/v1/nodes/"+nodes[0].Name()+"/proxy/stats/summary")
		var sum statsapi.Summary
		require.NoError(t, json.Unmarshal([]byte(raw), &sum))
		var found *statsapi.PodStats
		for i := range sum.Pods {
			if sum.Pods[i].PodRef.Name == "sessions" {
				found = &sum.Pods[i]
			}
		}
		require.NotNil(t, found, raw)
		require.NotNil(t, found.CPU)
		assert.Positive(t, *found.CPU.UsageCoreNanoSeconds)
		require.NotNil(t, found.Memory)
		assert.Positive(t, *found.Memory.WorkingSetBytes)
		assert.Len(t, found.Containers, 2)
		running := k.run(t, "get", "--raw", "/api/v1/nodes/"+nodes[0].Name()+"/proxy/runningpods/")
		assert.Contains(t, running, `"name":"sessions"`)
	})
}

// runStdin runs kubectl with stdin and returns its stdout and stderr; a
// failure fails t.
func (k *kubectl) runStdin(t *testing.T, stdin string, args ...string) (string, string) {
	t.Helper()
	cmd := k.command(testContextFor(t, clusterTimeout), args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	require.NoError(t, cmd.Run(), "kubectl %s: %s", strings.Join(args, " "), errOut.String())
	return out.String(), errOut.String()
}

// interactive is a background kubectl with its stdin a pipe.
type interactive struct {
	*background
	stdin io.WriteCloser
}

// startStdin starts kubectl with args and a pipe as its stdin.
func (k *kubectl) startStdin(t *testing.T, args ...string) *interactive {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := k.command(ctx, args...)
	b := &background{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() { b.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		stdin.Close()
		select {
		case <-b.done:
		default:
		}
	})
	return &interactive{background: b, stdin: stdin}
}

// runInTerminal runs kubectl on a terminal (terminaltest.Run) whose user
// types typed once the session has shown after, and returns what the
// terminal showed and kubectl's exit code.
func (k *kubectl) runInTerminal(t *testing.T, after, typed string, args ...string) (string, int) {
	t.Helper()
	shown, code := terminaltest.Run(t, k.command(testContextFor(t, clusterTimeout), args...),
		func(shown string) bool { return strings.Contains(shown, after) }, typed)
	t.Logf("kubectl %s on a terminal showed:\n%s", strings.Join(args, " "), shown)
	return shown, code
}
