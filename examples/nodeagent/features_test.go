package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// The agent's per-pod features are the assembly's, backed by its files: a
// static pod's env and configMap volume come from the objects directory
// beside the manifests, and its exec readiness probe runs in its
// container.
func TestStaticPodWithEnvVolumeAndProbeFromFiles(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	root := t.TempDir()
	opts.manifests = filepath.Join(root, "pods")
	require.NoError(t, os.Mkdir(opts.manifests, 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(root, "objects"), 0o755))
	writeObjects(t, filepath.Join(root, "objects"), "app.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {level: debug, mode: fast}\n")
	writeManifest(t, opts.manifests, "web", `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - {name: config, configMap: {name: app}}
  containers:
  - name: main
    image: example.com/web
    command: [sleep, "300"]
    env:
    - {name: LEVEL, valueFrom: {configMapKeyRef: {name: app, key: level}}}
    volumeMounts:
    - {name: config, mountPath: /etc/app}
    readinessProbe:
      exec: {command: [test, -f, /etc/app/mode]}
      periodSeconds: 1
`)
	a, out, stop, wait := startAgent(t, opts)
	var uid types.UID
	waitFor(t, a, "the static pod to run", func() bool {
		var ok bool
		uid, ok = a.runningStatic("web")
		return ok
	})
	if !a.rt.Containment().Sandbox {
		t.Skipf("no sandbox here, so no volume is mounted: %s", a.rt.Containment().SandboxFallback)
	}
	exec := func(cmd ...string) string {
		var b bytes.Buffer
		code, err := a.rt.Exec(context.Background(), uid, "main", cmd, processruntime.Streams{Stdout: &b, Stderr: &b})
		require.NoError(t, err)
		require.Zero(t, code, "%v: %s", cmd, b.String())
		return b.String()
	}
	assert.Equal(t, "debug\n", exec("sh", "-c", "echo $LEVEL"), "env from the objects directory")
	assert.Equal(t, "fast", exec("cat", "/etc/app/mode"), "a configMap volume from the objects directory")
	eventually(t, 20*time.Second, "the readiness probe passes", func() bool {
		st, err := a.rt.PodStatus(context.Background(), uid, time.Time{})
		require.NoError(t, err)
		c, _ := st.Container("main")
		return c.Ready != nil && *c.Ready
	})
	stop()
	require.NoError(t, wait(), "output:\n%s", out.String())
	requireNoProcess(t, a.rt, uid)
}

// A static pod whose emptyDir holds more than its sizeLimit is evicted,
// as by the kubelet's eviction manager: it ends Failed, reason Evicted,
// with the kubelet's message, and the agent says so; a pod under its
// limit runs on.
func TestAPodOverItsEmptyDirSizeLimitIsEvicted(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	opts.listen = "127.0.0.1:0"
	opts.volumeRefreshInterval = 200 * time.Millisecond
	pod := `apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 30
  volumes:
  - {name: cache, emptyDir: {sizeLimit: 1Mi}}
  containers:
  - name: main
    image: example.com/app
    command: [sh, -c, "dd if=/dev/zero of=/cache/fill bs=1024 count=%d 2>/dev/null; exec sleep 300"]
    volumeMounts:
    - {name: cache, mountPath: /cache}
`
	writeManifest(t, opts.manifests, "under", fmt.Sprintf(pod, "under", 256))
	writeManifest(t, opts.manifests, "over", fmt.Sprintf(pod, "over", 4096))
	a, out, stop, wait := startAgent(t, opts)
	if !a.rt.Containment().Sandbox {
		t.Skipf("no sandbox here, so no volume is mounted: %s", a.rt.Containment().SandboxFallback)
	}
	pods := func() map[string]podView {
		rec := httptest.NewRecorder()
		a.endpoint().httpHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/pods", nil))
		var body podsResponse
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		byName := map[string]podView{}
		for _, p := range body.Pods {
			byName[strings.TrimSuffix(strings.TrimPrefix(p.Name, "default/"), "-test-node")] = p
		}
		return byName
	}
	const msg = `Usage of EmptyDir volume "cache" exceeds the limit "1Mi".`
	waitFor(t, a, "the pod over its limit to be evicted, the one under it to run", func() bool {
		p := pods()
		over, under := p["over"], p["under"]
		return over.Status != nil && over.Status.Phase == v1.PodFailed && under.Status != nil && under.Status.Phase == v1.PodRunning
	})
	over := pods()["over"]
	assert.Equal(t, "Evicted", over.Status.Reason)
	assert.Equal(t, msg, over.Status.Message)
	stop()
	require.NoError(t, wait(), "output:\n%s", out.String())
	assert.Contains(t, out.String(), "SizeLimitExceeded")
	assert.Contains(t, out.String(), "evicting over-test-node: "+msg)
	assert.NotContains(t, out.String(), "evicting under-test-node", "the pod under its limit ran until the node shut down")
}
