package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/internal/containerdtest"
)

func TestRuntimeFlagsValidate(t *testing.T) {
	manifests := options{manifests: t.TempDir()}
	for name, tc := range map[string]struct {
		opts options
		rt   runtimeOptions
		want string
	}{
		"process":          {opts: options{}, rt: runtimeOptions{runtime: runtimeProcess}},
		"cri":              {opts: manifests, rt: runtimeOptions{runtime: runtimeCRI, criEndpoint: "unix:///run/containerd/containerd.sock"}},
		"cri, plain path":  {opts: manifests, rt: runtimeOptions{runtime: runtimeCRI, criEndpoint: "/run/containerd/containerd.sock"}},
		"unknown runtime":  {opts: manifests, rt: runtimeOptions{runtime: "docker"}, want: `--runtime "docker": want process or cri`},
		"cri without dir":  {opts: options{}, rt: runtimeOptions{runtime: runtimeCRI, criEndpoint: "unix:///x"}, want: "--runtime cri needs --manifests"},
		"cri with listen":  {opts: options{manifests: "d", listen: ":8080"}, rt: runtimeOptions{runtime: runtimeCRI, criEndpoint: "unix:///x"}, want: "--listen"},
		"cri, tcp address": {opts: manifests, rt: runtimeOptions{runtime: runtimeCRI, criEndpoint: "tcp://127.0.0.1:1"}, want: "want unix:///path/to/socket"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.rt.validate(tc.opts)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestRunCRI runs the agent over a real containerd: two static pods (one
// on the node's network, one on the CNI bridge, one with an init
// container) run to completion, and the agent shuts down with nothing left
// in the runtime.
func TestRunCRI(t *testing.T) {
	cd := containerdtest.Start(t)
	dir := t.TempDir()
	manifest := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644))
	}
	manifest("job", `apiVersion: v1
kind: Pod
metadata: {name: job, namespace: default}
spec:
  restartPolicy: Never
  initContainers:
  - {name: prepare, image: `+containerdtest.BusyboxImage+`, command: [sh, -c, "echo preparing"]}
  containers:
  - {name: work, image: `+containerdtest.BusyboxImage+`, command: [sh, -c, "echo working; exit 0"]}
`)
	manifest("hostjob", `apiVersion: v1
kind: Pod
metadata: {name: hostjob, namespace: default}
spec:
  hostNetwork: true
  restartPolicy: OnFailure
  containers:
  - {name: work, image: `+containerdtest.BusyboxImage+`, command: ["true"]}
`)
	// The per-pod primitives are wired: an emptyDir shared by an init
	// container and the container, a probe and a deadline do not refuse
	// the pod.
	manifest("shared", `apiVersion: v1
kind: Pod
metadata: {name: shared, namespace: default}
spec:
  restartPolicy: Never
  activeDeadlineSeconds: 600
  volumes:
  - {name: work, emptyDir: {}}
  initContainers:
  - {name: write, image: `+containerdtest.BusyboxImage+`, command: [sh, -c, "echo handed-over > /work/note"], volumeMounts: [{name: work, mountPath: /work}]}
  containers:
  - name: read
    image: `+containerdtest.BusyboxImage+`
    command: [sh, -c, "grep -q handed-over /in/note"]
    volumeMounts: [{name: work, mountPath: /in, readOnly: true}]
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 1}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"--runtime", "cri", "--cri-endpoint", cd.Endpoint, "--manifests", dir, "--until-idle",
		"--state-dir", t.TempDir(), "--node-name", "cri-node", "--manifest-interval", "1s", "--shutdown-grace", "10s"}, &stdout, &stderr)
	t.Logf("TIMING nodeagent --runtime cri, three static pods run to completion and the node shut down: %v", time.Since(start).Round(time.Millisecond))
	t.Logf("stdout:\n%s", stdout.String())
	require.Equal(t, exitOK, code, "stderr:\n%s", stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "connected to containerd")
	for _, pod := range []string{"job-cri-node_default", "hostjob-cri-node_default", "shared-cri-node_default"} {
		assert.Contains(t, out, pod+" ")
		assert.Regexp(t, pod+` +Succeeded;`, out, "summary of %s", pod)
	}
	assert.Contains(t, out, "prepare exited 0")
	assert.True(t, strings.Contains(out, "terminated → finished"), "the pods were cleaned up")

	pods, err := cd.Client.ListPodSandbox(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, pods, "nothing left in the runtime")
}

func TestRunCRIFlagsAndUnreachableRuntime(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--runtime", "cri"}, &stdout, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "--runtime cri needs --manifests")

	stderr.Reset()
	code = run(context.Background(), []string{"--runtime", "containerd", "--manifests", t.TempDir()}, &stdout, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), `--runtime "containerd": want process or cri`)

	stderr.Reset()
	sock := filepath.Join(t.TempDir(), "nobody-listens.sock")
	code = run(context.Background(), []string{"--runtime", "cri", "--cri-endpoint", "unix://" + sock, "--manifests", t.TempDir(), "--state-dir", t.TempDir()}, &stdout, &stderr)
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, stderr.String(), "the CRI runtime at unix://"+sock+" does not answer")
}

// TestRunCRIObjects runs over a real containerd a static pod whose env
// (configMapKeyRef, envFrom a secret) and configMap volume come from the
// files of --objects: the CRI agent resolves them through the assembly's
// features, as the process runtime's agent does. The container checks
// each value and exits non-zero on a mismatch.
func TestRunCRIObjects(t *testing.T) {
	cd := containerdtest.Start(t)
	manifests, objects := t.TempDir(), t.TempDir()
	writeObjects(t, objects, "app.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {level: debug, mode: fast}\n---\n"+
		"apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {PASSWORD: s3cret}\n")
	writeManifest(t, manifests, "configured", `apiVersion: v1
kind: Pod
metadata: {name: configured, namespace: default}
spec:
  restartPolicy: Never
  volumes:
  - {name: config, configMap: {name: app}}
  containers:
  - name: check
    image: `+containerdtest.BusyboxImage+`
    command: [sh, -c, 'test "$LEVEL" = debug && test "$DB_PASSWORD" = s3cret && test "$(cat /etc/app/mode)" = fast']
    env:
    - {name: LEVEL, valueFrom: {configMapKeyRef: {name: app, key: level}}}
    envFrom:
    - {prefix: DB_, secretRef: {name: db}}
    volumeMounts: [{name: config, mountPath: /etc/app}]
`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"--runtime", "cri", "--cri-endpoint", cd.Endpoint, "--manifests", manifests, "--objects", objects, "--until-idle",
		"--state-dir", t.TempDir(), "--node-name", "cri-node", "--manifest-interval", "1s", "--shutdown-grace", "10s"}, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	require.Equal(t, exitOK, code, "stderr:\n%s", stderr.String())
	out := stdout.String()
	assert.Regexp(t, `configured-cri-node_default +Succeeded; check exited 0`, out)
	assert.NotContains(t, out, "s3cret", "a secret's value is never printed")
}

// On the CRI runtime too, a pod whose emptyDir holds more than its
// sizeLimit is evicted: Failed, reason Evicted, with the kubelet's
// message; a pod under its limit finishes on its own.
func TestRunCRIEvictsAPodOverItsEmptyDirSizeLimit(t *testing.T) {
	cd := containerdtest.Start(t)
	manifests := t.TempDir()
	pod := `apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 30
  volumes:
  - {name: cache, emptyDir: {sizeLimit: 1Mi}}
  containers:
  - name: fill
    image: ` + containerdtest.BusyboxImage + `
    command: [sh, -c, 'dd if=/dev/zero of=/cache/fill bs=1024 count=%d 2>/dev/null; sleep %d']
    volumeMounts: [{name: cache, mountPath: /cache}]
`
	writeManifest(t, manifests, "over", fmt.Sprintf(pod, "over", 4096, 300))
	writeManifest(t, manifests, "under", fmt.Sprintf(pod, "under", 256, 3))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"--runtime", "cri", "--cri-endpoint", cd.Endpoint, "--manifests", manifests, "--until-idle",
		"--state-dir", t.TempDir(), "--node-name", "cri-node", "--manifest-interval", "1s", "--volume-refresh-interval", "200ms", "--shutdown-grace", "10s"}, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	require.Equal(t, exitOK, code, "stderr:\n%s", stderr.String())
	out := stdout.String()
	assert.Contains(t, out, `evicting over-cri-node: Usage of EmptyDir volume "cache" exceeds the limit "1Mi".`)
	assert.Regexp(t, `over-cri-node_default +phase Failed \(Evicted\)`, out)
	assert.Contains(t, out, `event Warning SizeLimitExceeded: Usage of EmptyDir volume "cache" exceeds the limit "1Mi".`)
	assert.Regexp(t, `under-cri-node_default +Succeeded; fill exited 0`, out)
	assert.NotContains(t, out, "evicting under-cri-node")
}
