package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
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
	"k8s.io/client-go/rest"

	"github.com/podkit/podkit/examples/kube/clustertest"

	"github.com/podkit/podkit/examples/kube/internal/terminaltest"
)

// testTimeout bounds the whole test (a cold start of the control plane
// under -race on a loaded machine included).
const testTimeout = 5 * time.Minute

// TestKubectl runs kubectl exec (with and without -it, exit codes), cp
// both ways, port-forward and attach through the API server against two
// podkit nodes: one the API server speaks SPDY to (it translates
// kubectl's WebSockets), one that declares ExtendWebSocketsToKubelet, so
// that kubectl's WebSocket streams reach it as they are. It uses the
// module's kubectl (1.37), and /usr/bin/kubectl too where there is one.
func TestKubectl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	kubectls := kubectlBinaries(t)

	server := httpServer(t, "pong from the pod's port 8080\n")
	rt := &hostRuntime{dir: t.TempDir(), port8080: server}
	logPath := filepath.Join(t.TempDir(), "cluster.log")
	logs, err := os.Create(logPath)
	require.NoError(t, err)
	defer logs.Close()
	c, err := clustertest.Start(ctx, clustertest.Options{
		Nodes: []clustertest.NodeOptions{{Name: "spdy"}, {Name: "websocket"}},
		NewAgent: func(env clustertest.NodeEnv) (clustertest.Agent, error) {
			return &streamingAgent{env: env, runtime: rt, websockets: env.Name == "websocket"}, nil
		},
		ControlPlaneLog: logs,
	})
	require.NoError(t, err)
	defer func() {
		assert.NoError(t, c.Close())
		if t.Failed() {
			tail(t, logPath)
		}
	}()
	admin := c.Admin()
	node, err := admin.CoreV1().Nodes().Get(ctx, "websocket", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{websocketFeature}, node.Status.DeclaredFeatures)

	waitDefaultServiceAccount(t, ctx, c)
	for _, n := range []string{"spdy", "websocket"} {
		runningPod(t, ctx, c, "p-"+n, n)
	}

	for _, bin := range kubectls {
		for _, n := range []string{"spdy", "websocket"} {
			k := &kubectl{bin: bin, kubeconfig: c.Kubeconfig(), home: t.TempDir()}
			pod := "p-" + n
			t.Run(kubectlName(bin)+"/"+n, func(t *testing.T) {
				t.Run("Exec", func(t *testing.T) {
					out, errOut, code := k.run(ctx, "", "exec", pod, "--", "sh", "-c", "echo out; echo err >&2")
					assert.Equal(t, 0, code, errOut)
					assert.Equal(t, "out\n", out)
					assert.Contains(t, errOut, "err\n")
					_, errOut, code = k.run(ctx, "", "exec", pod, "--", "sh", "-c", "exit 3")
					assert.Equal(t, 3, code, "kubectl exits with the command's code: %s", errOut)
					out, errOut, code = k.run(ctx, "typed on stdin\n", "exec", "-i", pod, "--", "cat")
					assert.Equal(t, 0, code, errOut)
					assert.Equal(t, "typed on stdin\n", out)
				})
				t.Run("ExecTTY", func(t *testing.T) {
					out, code := k.runInTerminal(t, ctx, "hello\r", "exec", "-it", pod, "--", "sh")
					assert.Equal(t, 0, code, out)
					assert.Contains(t, out, "tty 100x30", "the terminal's size reached the runtime")
					assert.Contains(t, out, "got hello", "keystrokes reached the runtime")
				})
				t.Run("Copy", func(t *testing.T) {
					local := filepath.Join(t.TempDir(), "up.txt")
					content := strings.Repeat("a line copied into the pod\n", 1000)
					require.NoError(t, os.WriteFile(local, []byte(content), 0o600))
					_, errOut, code := k.run(ctx, "", "cp", local, pod+":copied.txt")
					require.Equal(t, 0, code, errOut)
					out, errOut, code := k.run(ctx, "", "exec", pod, "--", "cat", "copied.txt")
					require.Equal(t, 0, code, errOut)
					assert.Equal(t, content, out, "into the pod")
					back := filepath.Join(t.TempDir(), "down.txt")
					_, errOut, code = k.run(ctx, "", "cp", pod+":copied.txt", back)
					require.Equal(t, 0, code, errOut)
					got, err := os.ReadFile(back)
					require.NoError(t, err)
					assert.Equal(t, content, string(got), "out of the pod")
				})
				t.Run("PortForward", func(t *testing.T) {
					local, stop := k.portForward(t, ctx, pod, "8080")
					defer stop()
					for range 2 { // two connections through one session
						resp, err := http.Get("http://" + local + "/")
						require.NoError(t, err)
						body, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						require.NoError(t, err)
						assert.Equal(t, "pong from the pod's port 8080\n", string(body))
					}
				})
				t.Run("Attach", func(t *testing.T) {
					out, errOut, code := k.run(ctx, "hi from stdin\n", "attach", "-i", pod, "-c", "c")
					assert.Equal(t, 0, code, errOut)
					assert.Contains(t, out, "attached to c\nhi from stdin\n")
				})
			})
		}
	}

	t.Run("WithoutNodesProxy", func(t *testing.T) {
		k := &kubectl{bin: kubectls[0], kubeconfig: c.Kubeconfig(), home: t.TempDir()}
		_, errOut, code := k.run(ctx, "", "create", "serviceaccount", "nobody")
		require.Equal(t, 0, code, errOut)
		token, errOut, code := k.run(ctx, "", "create", "token", "nobody")
		require.Equal(t, 0, code, errOut)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(c.AdminConfig().CAData))
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		node, err := admin.CoreV1().Nodes().Get(ctx, "spdy", metav1.GetOptions{})
		require.NoError(t, err)
		for _, path := range []string{"/exec/default/p-spdy/c?command=true&output=1", "/attach/default/p-spdy/c?output=1", "/portForward/default/p-spdy"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, kubeletURL(node)+path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
			resp, err := client.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %s", path, body)
			assert.Contains(t, string(body), "subresource(s)=[proxy]")
		}
		nobody := filepath.Join(t.TempDir(), "nobody.kubeconfig")
		require.NoError(t, clustertest.WriteKubeconfig(nobody, &rest.Config{
			Host: c.AdminConfig().Host, BearerToken: strings.TrimSpace(token),
			TLSClientConfig: rest.TLSClientConfig{CAData: c.AdminConfig().CAData},
		}))
		k = &kubectl{bin: kubectls[0], kubeconfig: nobody, home: t.TempDir()}
		_, errOut, code = k.run(ctx, "", "exec", "p-spdy", "--", "true")
		assert.NotEqual(t, 0, code)
		assert.Contains(t, errOut, "Forbidden", "the API server refuses it too (pods/exec)")
	})
}

// kubectlBinaries are the module's kubectl (built once into the build
// cache by go tool) and /usr/bin/kubectl when there is one.
func kubectlBinaries(t *testing.T) []string {
	start := time.Now()
	out, err := exec.Command("go", "tool", "-n", "kubectl").CombinedOutput()
	require.NoError(t, err, "building the module's kubectl: %s", out)
	bins := []string{strings.TrimSpace(string(out))}
	t.Logf("the module's kubectl is %s (%v)", bins[0], time.Since(start).Round(time.Millisecond))
	if _, err := os.Stat("/usr/bin/kubectl"); err == nil {
		bins = append(bins, "/usr/bin/kubectl")
	}
	return bins
}

// kubectlName names a kubectl in the subtests: "module" for the module's,
// else its path's base.
func kubectlName(bin string) string {
	if strings.HasPrefix(bin, "/usr/") {
		return filepath.Base(bin)
	}
	return "module"
}

// kubectl runs one kubectl against the cluster, with a home of its own.
type kubectl struct{ bin, kubeconfig, home string }

func (k *kubectl) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+k.home, "KUBECONFIG="+k.kubeconfig)
	return cmd
}

// run runs kubectl with stdin and returns its output and exit code.
func (k *kubectl) run(ctx context.Context, stdin string, args ...string) (string, string, int) {
	cmd := k.command(ctx, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err := cmd.Run()
	code := terminaltest.ExitCode(err)
	if code == -1 {
		errOut.WriteString(err.Error())
	}
	return out.String(), errOut.String(), code
}

// runInTerminal runs kubectl on a terminal (terminaltest.Run) whose user
// types typed once the session shows the terminal's size, and returns
// what the terminal showed and the exit code.
func (k *kubectl) runInTerminal(t *testing.T, ctx context.Context, typed string, args ...string) (string, int) {
	// Type once the session is up: the runtime printed the size.
	ready := func(shown string) bool { return strings.Contains(shown, "tty ") && strings.HasSuffix(shown, "\r\n") }
	return terminaltest.Run(t, k.command(ctx, args...), ready, typed)
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)

// portForward runs kubectl port-forward to the pod's port and returns the
// local address, and a function that stops kubectl.
func (k *kubectl) portForward(t *testing.T, ctx context.Context, pod, port string) (string, func()) {
	cmd := k.command(ctx, "port-forward", "--address", "127.0.0.1", pod, ":"+port)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	require.NoError(t, cmd.Start())
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if m := forwarding.FindStringSubmatch(lines.Text()); m != nil {
			go io.Copy(io.Discard, stdout)
			return "127.0.0.1:" + m[1], stop
		}
	}
	stop()
	require.FailNow(t, "kubectl port-forward did not forward", "%s", errOut.String())
	return "", nil
}

// httpServer serves body on a loopback port until t ends.
func httpServer(t *testing.T, body string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// waitDefaultServiceAccount waits for the serviceaccount controller to
// make the default namespace's account, which pod admission requires.
func waitDefaultServiceAccount(t *testing.T, ctx context.Context, c *clustertest.Cluster) {
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.Admin().CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err)
}

// runningPod binds a pod to node and reports it Running, as its agent
// would: the test's agents run nothing themselves.
func runningPod(t *testing.T, ctx context.Context, c *clustertest.Cluster, name, node string) {
	pods := c.Admin().CoreV1().Pods("default")
	pod, err := pods.Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName:    node,
			Containers:  []v1.Container{{Name: "c", Image: "none"}},
			Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	now := metav1.Now()
	pod.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: &now,
		Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}}},
	}
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// tail logs the end of the control plane's log.
func tail(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	t.Logf("the last lines of %s:\n%s", path, strings.Join(lines[max(0, len(lines)-60):], "\n"))
}
