package kubeletserver_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/examples/internal/containerdtest"
	"github.com/podkit/podkit/examples/kube/kubeletserver"
	"github.com/podkit/podkit/podworker"
)

// TestCRI drives a real containerd (shared/CRI.md; skipped, saying why,
// without it) through the CRI syncer and the kubelet API: exec, attach and
// port-forward are proxied to containerd's own streaming server, over
// SPDY and WebSocket, and the pods' stats come from ListContainerStats
// and ListPodSandboxStats.
func TestCRI(t *testing.T) {
	cd := containerdtest.Start(t)
	syncer, err := cri.New(cd.Client, cd.Client, cri.Options{Images: cd.Client, Stats: cd.Client, RuntimeName: "containerd"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	grace := int64(1)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{
			{Name: "web", Image: containerdtest.BusyboxImage, Command: []string{"sh", "-c",
				"busybox mkdir -p /www && echo pong > /www/index.html && busybox httpd -p 8080 -h /www && echo > /ready && exec sleep 3600"}},
			{Name: "talker", Image: containerdtest.BusyboxImage, Command: []string{"sh", "-c", "while true; do echo tick; sleep 0.2; done"}},
		}},
	}
	_, err = syncer.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		assert.NoError(t, syncer.SyncTerminatingPod(ctx, pod, nil, 0, nil))
		assert.NoError(t, syncer.SyncTerminatedPod(ctx, pod, nil))
	})

	n := startNode(t, kubeletserver.Options{
		Pods:        pods{"ns/web": pod}.get,
		StreamURLs:  syncer,
		Stats:       kubeletserver.CRIStats(syncer),
		RunningPods: syncer.RunningPods,
	})
	q := func(command ...string) url.Values {
		v := url.Values{"command": command}
		v.Set("output", "1")
		v.Set("error", "1")
		return v
	}
	execIn := func(container string, v url.Values) string {
		return n.url + "/exec/ns/web/" + container + "?" + v.Encode()
	}

	t.Run("Exec", func(t *testing.T) {
		// Wait, inside the container, for its server.
		for proto, e := range executors(t, n, execIn("web", q("sh", "-c", "while ! [ -e /ready ]; do sleep 0.05; done; echo ready"))) {
			var out bytes.Buffer
			require.NoError(t, e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: io.Discard}), proto)
			assert.Equal(t, "ready\n", out.String(), proto)
		}
		for proto, e := range executors(t, n, execIn("web", q("sh", "-c", "echo out; echo err >&2; exit 3"))) {
			var out, errOut bytes.Buffer
			err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
			var exitErr exec.CodeExitError
			require.ErrorAs(t, err, &exitErr, proto)
			assert.Equal(t, 3, exitErr.ExitStatus(), proto)
			assert.Equal(t, "out\n", out.String(), proto)
			assert.Equal(t, "err\n", errOut.String(), proto)
		}
		v := q("cat")
		v.Set("input", "1")
		for proto, e := range executors(t, n, execIn("web", v)) {
			var out bytes.Buffer
			require.NoError(t, e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &out, Stderr: io.Discard}), proto)
			assert.Equal(t, "typed\n", out.String(), proto)
		}
		code, body := get(t, n.admin(), execIn("nosuch", q("true")), "")
		assert.Equal(t, http.StatusNotFound, code, body)
	})

	t.Run("Attach", func(t *testing.T) {
		for proto, e := range executors(t, n, n.url+"/attach/ns/web/talker?output=1&error=1") {
			actx, stop := context.WithCancel(ctx)
			r, w := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- e.StreamWithContext(actx, remotecommand.StreamOptions{Stdout: w, Stderr: io.Discard}) }()
			line, err := bufio.NewReader(r).ReadString('\n')
			require.NoError(t, err, proto)
			assert.Equal(t, "tick\n", line, proto)
			stop()
			r.Close()
			<-done
		}
	})

	t.Run("PortForward", func(t *testing.T) {
		for proto, d := range portForwardDialers(t, n, "/portForward/ns/web") {
			ports, stop := forwardPorts(t, proto, d, "0:8080")
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))))
			require.NoError(t, err, proto)
			_, err = io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
			require.NoError(t, err)
			resp, err := io.ReadAll(c)
			require.NoError(t, err, proto)
			c.Close()
			assert.Contains(t, string(resp), "200 OK", proto)
			assert.True(t, strings.HasSuffix(string(resp), "pong\n"), "%s: the pod's server answered: %q", proto, resp)
			stop()
		}
	})

	t.Run("Stats", func(t *testing.T) {
		stats, err := kubeletserver.CRIStats(syncer).PodStats(ctx)
		require.NoError(t, err)
		require.Len(t, stats, 1)
		p := stats[0]
		assert.Equal(t, "web", p.PodRef.Name)
		require.Len(t, p.Containers, 2)
		assert.Equal(t, "talker", p.Containers[0].Name)
		for _, c := range p.Containers {
			require.NotNil(t, c.CPU, c.Name)
			require.NotNil(t, c.CPU.UsageCoreNanoSeconds, c.Name)
			require.NotNil(t, c.Memory, c.Name)
			require.NotNil(t, c.Memory.WorkingSetBytes, c.Name)
			assert.Positive(t, *c.Memory.WorkingSetBytes, c.Name)
			assert.Positive(t, c.StartTime.Unix(), c.Name)
		}
		assert.Positive(t, *p.Containers[0].CPU.UsageCoreNanoSeconds, "the talker used some CPU")
		require.NotNil(t, p.CPU)
		require.NotNil(t, p.Memory)
		code, body := get(t, n.admin(), n.url+"/metrics/resource", "")
		require.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, `container_cpu_usage_seconds_total{container="talker",namespace="ns",pod="web"}`)
		assert.Contains(t, body, `pod_memory_working_set_bytes{namespace="ns",pod="web"}`)
		assert.Contains(t, body, "resource_scrape_error 0")

		running, err := syncer.RunningPods(ctx)
		require.NoError(t, err)
		require.Len(t, running, 1)
		assert.Equal(t, pod.UID, running[0].UID)
		assert.Equal(t, []string{"talker", "web"}, []string{running[0].Spec.Containers[0].Name, running[0].Spec.Containers[1].Name})
	})
}
