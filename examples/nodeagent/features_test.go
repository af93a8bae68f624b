package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
