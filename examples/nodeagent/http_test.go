package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// secretManifest is a static pod with a secret in every place the agent
// could leak it from.
const secretManifest = `apiVersion: v1
kind: Pod
metadata:
  name: secretive
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"spec":{"containers":[{"env":[{"name":"DB_PASSWORD","value":"hunter2"}]}]}}'
    example.com/db-password: hunter2
    example.com/owner: team-a
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: example.com/secretive
    command: [sh, -c, "exec sleep 300", sh, --db-password=hunter2, PASSWORD=hunter2, --token, hunter2]
    env:
    - {name: DB_PASSWORD, value: hunter2}
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    readinessProbe:
      exec: {command: [sh, -c, "PGPASSWORD=hunter2 true"]}
    livenessProbe:
      exec: {command: [check, --api-key, hunter2]}
    lifecycle:
      preStop:
        exec: {command: [sh, -c, "PGPASSWORD=hunter2 pg_ctl stop"]}
`

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestTheEndpointRedactsSecrets(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	opts.listen = "127.0.0.1:0"
	writeManifest(t, opts.manifests, "secretive", secretManifest)
	a, out, stop, wait := startAgent(t, opts)
	var uid types.UID
	waitFor(t, a, "the pod to run with its mirror pod", func() bool {
		for _, info := range a.workers.Pods() {
			if info.MirrorPod != nil && a.running(info.UID) {
				uid = info.UID
				return true
			}
		}
		return false
	})
	base := "http://" + a.server.listener.Addr().String()
	for _, path := range []string{"/pods", "/pods/" + string(uid)} {
		code, body := get(t, base+path)
		require.Equal(t, http.StatusOK, code, path)
		assert.NotContains(t, body, "hunter2", "%s serves a secret", path)
		// The pod and its mirror pod: the env value, the probe's header, two
		// annotations, three values in the command, one in the exec probe
		// and one in the exec hook, each.
		assert.Equal(t, 2*9, strings.Count(body, redacted), "%s redacts each secret of the pod and its mirror pod:\n%s", path, body)
		assert.Contains(t, body, `"--db-password=[redacted]"`, "%s keeps the flag's name", path)
		assert.Contains(t, body, `"exec sleep 300"`, "%s keeps what is not secret-shaped", path)
		assert.Contains(t, body, "team-a", "an annotation that is not secret-shaped is kept")
		assert.Contains(t, body, "metadata.name", "env references are kept")
	}
	var v podView
	_, body := get(t, base+"/pods/"+string(uid))
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	assert.Equal(t, uid, v.UID)
	require.NotNil(t, v.Worker.Pod)
	assert.Empty(t, v.Worker.Pod.Status.Phase, "the desired pod's Pending phase is not served beside the real one")
	require.NotNil(t, v.Status)
	assert.Equal(t, v1.PodRunning, v.Status.Phase)

	code, body := get(t, base+"/pods/no-such-uid")
	assert.Equal(t, http.StatusNotFound, code)
	assert.JSONEq(t, `{"error":"no pod with UID \"no-such-uid\""}`, body)
	stop()
	require.NoError(t, wait(), "output:\n%s", out.String())
}

func TestRedactPodLeavesTheOriginalAlone(t *testing.T) {
	t.Parallel()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"API-Token": "x"}},
		Spec: v1.PodSpec{
			InitContainers:      []v1.Container{{Env: []v1.EnvVar{{Name: "A", Value: "s1"}}}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Env: []v1.EnvVar{{Name: "B", Value: "s2"}, {Name: "EMPTY"}}}}},
			Containers:          []v1.Container{{Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{HTTPHeaders: []v1.HTTPHeader{{Name: "X-Key", Value: "s3"}}}}}}},
		},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	r := redactPod(pod)
	assert.Equal(t, redacted, r.Annotations["API-Token"])
	assert.Equal(t, redacted, r.Spec.InitContainers[0].Env[0].Value)
	assert.Equal(t, redacted, r.Spec.EphemeralContainers[0].Env[0].Value)
	assert.Empty(t, r.Spec.EphemeralContainers[0].Env[1].Value, "an empty value stays empty")
	assert.Equal(t, redacted, r.Spec.Containers[0].Lifecycle.PreStop.HTTPGet.HTTPHeaders[0].Value)
	assert.Empty(t, r.Status.Phase)
	assert.Equal(t, "s1", pod.Spec.InitContainers[0].Env[0].Value, "the original is untouched")
	assert.Equal(t, "x", pod.Annotations["API-Token"])
	assert.Equal(t, v1.PodPending, pod.Status.Phase)
	assert.Nil(t, redactPod(nil))
}

// newIdleAgent builds an agent that is not run, holding n pods that
// admission rejected, each with an annotation of size bytes: what /pods
// serves without any process.
func newIdleAgent(t *testing.T, n, size int) *agent {
	t.Helper()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	a, err := newAgent(opts, io.Discard, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(func() { a.rt.Close() })
	a.server = a.endpoint() // it does not run: the test serves it
	filler := strings.Repeat("x", size)
	for i := range n {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pod-%05d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%05d", i)),
			Annotations: map[string]string{"example.com/filler": filler},
		}}
		a.records.edit(pod.UID, func(rec *podRecord) {
			rec.setPod(pod)
			rec.rejected = &v1.PodStatus{Phase: v1.PodFailed, Reason: "Test", Message: filler}
		})
	}
	return a
}

func TestPodsArePaged(t *testing.T) {
	t.Parallel()
	a := newIdleAgent(t, 7, 10)
	srv := httptest.NewServer(a.endpoint().httpHandler())
	defer srv.Close()

	var names []string
	url := srv.URL + "/pods?limit=3"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 3, "7 pods come in 3 pages of 3")
		code, body := get(t, url)
		require.Equal(t, http.StatusOK, code, body)
		var page podsResponse
		require.NoError(t, json.Unmarshal([]byte(body), &page), body)
		assert.Equal(t, "test-node", page.Node)
		for _, p := range page.Pods {
			names = append(names, p.Name)
			require.NotNil(t, p.Status)
			assert.Equal(t, v1.PodFailed, p.Status.Phase)
		}
		if page.Continue == "" {
			break
		}
		assert.Len(t, page.Pods, 3)
		url = srv.URL + "/pods?limit=3&continue=" + page.Continue
	}
	assert.Equal(t, []string{"default/pod-00000", "default/pod-00001", "default/pod-00002", "default/pod-00003", "default/pod-00004", "default/pod-00005", "default/pod-00006"}, names)

	code, body := get(t, srv.URL+"/pods?limit=100000")
	require.Equal(t, http.StatusOK, code)
	var all podsResponse
	require.NoError(t, json.Unmarshal([]byte(body), &all))
	assert.Len(t, all.Pods, 7, "a limit above the largest page is clamped")
	assert.Empty(t, all.Continue)

	for _, q := range []string{"limit=0", "limit=-1", "limit=x", "continue=!!", "continue=e30"} {
		code, body := get(t, srv.URL+"/pods?"+q)
		assert.Equal(t, http.StatusBadRequest, code, q)
		assert.Contains(t, body, `"error"`, q)
	}
}

func TestTheEndpointListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listen string
		allow  bool
		ok     bool
	}{
		{"127.0.0.1:0", false, true},
		{"[::1]:0", false, true},
		{"localhost:0", false, true},
		{":0", false, false},
		{"0.0.0.0:0", false, false},
		{":0", true, true},
	} {
		t.Run(fmt.Sprintf("%s allowed=%v", tc.listen, tc.allow), func(t *testing.T) {
			opts := testOptions(t)
			opts.manifests = t.TempDir()
			opts.listen, opts.listenNonLoopback = tc.listen, tc.allow
			a, err := newAgent(opts, io.Discard, logr.Discard())
			if tc.ok {
				if err != nil && strings.Contains(err.Error(), "cannot assign requested address") {
					t.Skipf("no such interface here: %v", err)
				}
				require.NoError(t, err)
				a.server.listener.Close()
				a.rt.Close()
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "is not a loopback address")
			assert.Contains(t, err.Error(), "--listen-non-loopback")
		})
	}
}

// rss returns the process's resident set size, after a garbage collection
// returned what it could to the operating system.
func rss(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// Many clients that ask for the largest page of /pods and never read it
// must not make the agent hold a reply each: the reply is streamed, the
// requests served at once are bounded, and the write timeout ends them.
func TestSlowClientsDoNotGrowMemory(t *testing.T) {
	const (
		pods    = 500
		size    = 40 << 10 // a page of /pods is about 40 MB (the filler is served twice)
		clients = 40
	)
	a := newIdleAgent(t, pods, size)
	a.server.timeouts.write = 5 * time.Second
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := smallBuffers{tcp}
	srv := a.server.newHTTPServer()
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	before := rss(t)
	request := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
		t.Cleanup(func() { c.Close() })
		_, err = fmt.Fprintf(c, "GET /pods?limit=%d HTTP/1.1\r\nHost: agent\r\n\r\n", pods)
		require.NoError(t, err)
		return c
	}
	// Slow clients take every slot...
	for range httpMaxInFlight {
		request()
	}
	eventually(t, 20*time.Second, "the requests in flight to fill every slot", func() bool { return len(a.server.slots) == httpMaxInFlight })
	// ... and the clients over the limit are told to come back later.
	for range clients - httpMaxInFlight {
		c := request()
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		line, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "HTTP/1.1 503 Service Unavailable\r\n", line)
	}
	during := rss(t)
	growth := during - before
	t.Logf("RSS %d MiB before, %d MiB with %d clients that do not read a %d-pod page (%d served at once): +%d MiB", before>>20, during>>20, clients, pods, httpMaxInFlight, growth>>20)
	assert.Less(t, growth, int64(64<<20), "the agent's memory grows with the replies its slow clients do not read")

	// The write timeout ends the stalled replies and frees their slots.
	eventually(t, 20*time.Second, "the write timeout to free every slot", func() bool { return len(a.server.slots) == 0 })
}

// smallBuffers gives each accepted connection a small send buffer, so a
// reply no one reads blocks the server after a few kilobytes, as it does
// with a remote client, rather than after the megabytes a loopback
// connection buffers.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// eventually polls cond every 20ms until it holds, failing after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			if !cond() {
				t.Fatalf("%s: not within %v", what, limit)
			}
			return
		}
	}
}
