package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/podworker"
)

// syncBuffer is an io.Writer safe for the agent's concurrent lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testOptions are the agent's defaults with a fresh state directory.
func testOptions(t *testing.T) options {
	return options{
		stateDir:         t.TempDir(),
		nodeName:         "test-node",
		shutdownGrace:    20 * time.Second,
		restartBackOff:   time.Second,
		manifestInterval: 200 * time.Millisecond,
		demoTimeout:      45 * time.Second,
	}
}

// startAgent builds an agent and runs it until the returned stop is called
// (or, in demo and --until-idle modes, until it ends); wait returns run's
// error. The output is in out.
func startAgent(t *testing.T, opts options) (a *agent, out *syncBuffer, stop func(), wait func() error) {
	t.Helper()
	return startAgentWithLog(t, opts, logr.Discard())
}

// startAgentWithLog is startAgent with the agent's logs going to log.
func startAgentWithLog(t *testing.T, opts options, log logr.Logger) (a *agent, out *syncBuffer, stop func(), wait func() error) {
	t.Helper()
	out = &syncBuffer{}
	a, err := newAgent(opts, out, log)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()
	var once sync.Once
	var runErr error
	wait = func() error {
		once.Do(func() {
			select {
			case runErr = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("the agent did not stop within 60s; output:\n%s", out.String())
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		cancel()
		_ = wait()
	})
	return a, out, cancel, wait
}

// endpoint returns the agent's HTTP endpoint, or one made for the test
// over the agent's parts when it has none (no --listen).
func (a *agent) endpoint() *podServer {
	if a.server != nil {
		return a.server
	}
	return newPodServer(a.opts.nodeName, nil, a.records, a.workers, a.rt, a.log)
}

// uids returns the UIDs of every pod the agent has a record of.
func (a *agent) uids() []types.UID {
	a.records.mu.Lock()
	defer a.records.mu.Unlock()
	var out []types.UID
	for uid := range a.records.pods {
		out = append(out, uid)
	}
	return out
}

// requireNoProcess checks the process table for processes of uids that
// rt (or an earlier runtime on its state directory) started.
func requireNoProcess(t *testing.T, rt *processruntime.Runtime, uids ...types.UID) {
	t.Helper()
	want := map[string]bool{}
	for _, u := range uids {
		want[string(u)] = true
	}
	// Only this runtime's processes: parallel tests run the same static
	// manifests on the same node name, so their pods share UIDs.
	all, err := rt.Processes()
	require.NoError(t, err)
	var left []processruntime.Process
	for _, p := range all {
		if want[p.PodUID] {
			left = append(left, p)
		}
	}
	require.Empty(t, left, "processes of the agent's pods are still in the process table")
}

func writeManifest(t *testing.T, dir, name, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644))
}

// waitFor waits until cond holds, using the agent's own notifications.
func waitFor(t *testing.T, a *agent, what string, cond func() bool) {
	t.Helper()
	// A bound against a hang, not a measure: 60 sandboxed pods on a
	// loaded 2-core machine under -race take tens of seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, a.records.waitUntil(ctx, cond), "waiting for %s", what)
}

func TestDemoRunsToItsSummary(t *testing.T) {
	t.Parallel()
	start := time.Now()
	a, out, _, wait := startAgent(t, testOptions(t))
	require.NoError(t, wait(), "output:\n%s", out.String())
	took := time.Since(start)
	t.Logf("the demo took %v; output:\n%s", took, out)

	type want struct {
		phase    string
		restarts int32
		exit     string
		note     string
	}
	expected := map[string]want{
		"default/web":                  {"Succeeded", 0, "server=0", "node shutdown"},
		"default/job":                  {"Succeeded", 0, "fetch=0 compute=0", "finished on its own"},
		"default/crashy":               {"Succeeded", 2, "flaky=0", "finished on its own"},
		"default/graceful":             {"Succeeded", 0, "worker=0", "deleted, grace 5s"},
		"default/greedy":               {"Failed", 0, "-", "rejected: OutOfcpu"},
		"default/static-web-test-node": {"Succeeded", 0, "server=0", "static, has a mirror pod"},
	}
	rows, _ := a.timeline.summary()
	got := map[string]summaryRow{}
	for _, r := range rows {
		got[r.Pod] = r
	}
	require.Len(t, got, len(expected), "pods in the summary: %+v", rows)
	for pod, w := range expected {
		r, ok := got[pod]
		require.True(t, ok, "%s is in the summary", pod)
		assert.Equal(t, w.phase, r.Phase, pod)
		assert.Equal(t, w.restarts, r.Restarts, pod)
		assert.Equal(t, w.exit, r.ExitCodes, pod)
		assert.Contains(t, r.Note, w.note, pod)
	}
	graceful, err := time.ParseDuration(got["default/graceful"].Termination)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, graceful, time.Second, "the graceful pod cleans up for a second after SIGTERM")
	// That it ended within its grace period is its exit code 0 above (at
	// the end of the grace it would have been killed, 137); the duration
	// also counts the cleanup after its exit, seconds on a loaded machine.

	text := out.String()
	requireStampsInOrder(t, text)
	for _, line := range []string{
		"absent → rejected",
		"default/graceful                syncing → termination-requested      deleted, grace 5s",
		"default/job                     syncing → terminating                finished on its own (Succeeded)",
		"· container flaky started",
		"(restart 2)",
		"api server: created the mirror pod of static pod default/static-web-test-node",
		"node shutdown, grace",
		"summary after",
	} {
		assert.Contains(t, text, line)
	}
	requireNoProcess(t, a.rt, a.uids()...)

	// Every pod was cleaned up. What is left are the tombstones (logs and
	// final states) of the pods config still has; the graceful pod left
	// config, and its logs went with it.
	assert.Empty(t, a.rt.RuntimePods())
	var left []string
	for _, rp := range a.rt.Tombstones() {
		left = append(left, rp.Namespace+"/"+rp.Name)
		assert.NoDirExists(t, filepath.Join(a.rt.PodDir(rp.UID), "scratch"), "the scratch directory of %s was removed", rp.Name)
	}
	assert.ElementsMatch(t, []string{"default/web", "default/job", "default/crashy", "default/static-web-test-node"}, left)
	entries, err := os.ReadDir(filepath.Join(a.opts.stateDir, "runtime", "pods"))
	require.NoError(t, err)
	assert.Len(t, entries, len(left), "nothing but tombstones is left in the state directory")
	log, err := containerLog(a.rt, uidOf(t, a, "default/job"), "compute")
	require.NoError(t, err)
	assert.Equal(t, "job: 6 x 7 = 42\n", log, "the job's log outlives its cleanup")
}

// uidOf returns the UID of the pod the agent knows by namespace/name.
func uidOf(t *testing.T, a *agent, name string) types.UID {
	t.Helper()
	a.records.mu.Lock()
	defer a.records.mu.Unlock()
	for uid, rec := range a.records.pods {
		if rec.name == name {
			return uid
		}
	}
	t.Fatalf("the agent knows no pod %s", name)
	return ""
}

func TestPodsEndpoint(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	opts.listen = "127.0.0.1:0"
	writeManifest(t, opts.manifests, "sleeper", `apiVersion: v1
kind: Pod
metadata: {name: sleeper}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - {name: main, image: example.com/sleeper, command: [sleep, "300"]}
`)
	a, out, stop, wait := startAgent(t, opts)
	var uid types.UID
	waitFor(t, a, "the sleeper to run", func() bool {
		for _, info := range a.workers.Pods() {
			if st, _ := a.rt.PodStatus(context.Background(), info.UID, time.Time{}); st.Running() {
				uid = info.UID
				return true
			}
		}
		return false
	})

	srv := httptest.NewServer(a.endpoint().httpHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/pods")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var body podsResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, "test-node", body.Node)
	require.Len(t, body.Pods, 1)
	p := body.Pods[0]
	assert.Equal(t, uid, p.UID)
	assert.Equal(t, "default/sleeper-test-node", p.Name)
	assert.Equal(t, "sleeper-test-node_default", p.FullName)
	require.NotNil(t, p.Worker)
	assert.Equal(t, "syncing", p.Worker.Stage)
	assert.True(t, p.Worker.Started)
	assert.True(t, p.Worker.Static)
	require.NotNil(t, p.Worker.Pod)
	assert.Equal(t, uid, p.Worker.Pod.UID)
	assert.Equal(t, windowView{CouldHaveRunningContainers: true}, p.Window)
	require.NotNil(t, p.Status)
	assert.Equal(t, v1.PodRunning, p.Status.Phase)
	require.Len(t, p.Status.ContainerStatuses, 1)
	assert.NotNil(t, p.Status.ContainerStatuses[0].State.Running)

	// The same over --listen, and /healthz.
	health, err := http.Get("http://" + a.server.listener.Addr().String() + "/healthz")
	require.NoError(t, err)
	data, _ := io.ReadAll(health.Body)
	health.Body.Close()
	assert.Equal(t, http.StatusOK, health.StatusCode)
	assert.Equal(t, "ok\n", string(data))

	stop()
	require.NoError(t, wait(), "output:\n%s", out.String())
	requireNoProcess(t, a.rt, uid)

	// After the shutdown the endpoint tells the pod is gone for good.
	rec := httptest.NewRecorder()
	a.endpoint().httpHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/pods", nil))
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Len(t, body.Pods, 1)
	assert.True(t, body.Pods[0].Window.IsPodKnownTerminated)
	assert.False(t, body.Pods[0].Window.CouldHaveRunningContainers)
	assert.Equal(t, "finished", body.Pods[0].Worker.Stage)
	assert.Equal(t, v1.PodFailed, body.Pods[0].Status.Phase, "sleep died of SIGTERM")
	assert.Equal(t, "Terminated", body.Pods[0].Status.Reason, "the node shutdown's final status")
}

func TestCleanShutdownLeavesNoProcessBehind(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	// Ignores SIGTERM, and has a child of its own: only SIGKILL, after its
	// one-second grace period, ends it.
	writeManifest(t, opts.manifests, "stubborn", `apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: example.com/stubborn
    command: [sh, -c, "trap '' TERM; sleep 300 & echo trapped; while :; do sleep 1; done"]
`)
	writeManifest(t, opts.manifests, "polite", `apiVersion: v1
kind: Pod
metadata: {name: polite}
spec:
  containers:
  - {name: main, image: example.com/polite, command: [sleep, "300"]}
`)
	a, out, stop, wait := startAgent(t, opts)
	waitFor(t, a, "both pods to run, the stubborn one past its trap", func() bool {
		running := 0
		for _, info := range a.workers.Pods() {
			if st, _ := a.rt.PodStatus(context.Background(), info.UID, time.Time{}); !st.Running() {
				continue
			}
			if strings.HasPrefix(info.FullName, "stubborn") {
				// A SIGTERM before the trap is set would end the shell.
				if !logContains(a.rt, info.UID, "main", "trapped") {
					continue
				}
			}
			running++
		}
		return running == 2
	})
	uids := a.uids()
	left, err := processruntime.ScanProcesses(func(uid string) bool { return uid == string(uids[0]) || uid == string(uids[1]) })
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(left), 3, "the pods' processes are in the process table")

	start := time.Now()
	stop() // as SIGINT does
	require.NoError(t, wait(), "output:\n%s", out.String())
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "the stubborn pod had its grace period")
	requireNoProcess(t, a.rt, uids...)

	rows := map[string]summaryRow{}
	list, _ := a.timeline.summary()
	for _, r := range list {
		rows[r.Pod] = r
	}
	assert.Equal(t, "main=137", rows["default/stubborn-test-node"].ExitCodes, "SIGKILL after the grace period")
	assert.Equal(t, "main=143", rows["default/polite-test-node"].ExitCodes, "SIGTERM")
	assert.Contains(t, out.String(), "interrupted")
}

func TestUntilIdleRunsManifestsToCompletion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeManifest(t, dir, "once", `apiVersion: v1
kind: Pod
metadata: {name: once}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: example.com/once, command: [sh, -c, "echo hello from once"]}
`)
	writeManifest(t, dir, "typo", `apiVersion: v1
kind: Pod
metadata: {name: typo}
spec:
  containers:
  - {name: main, image: example.com/x, comand: [true]}
`)
	var stdout, stderr syncBuffer
	code := run(context.Background(), []string{"--manifests", dir, "--until-idle", "--state-dir", t.TempDir(), "--node-name", "idle-node"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "default/once-idle-node")
	assert.Regexp(t, `default/once-idle-node +Succeeded +0 +main=0`, out)
	assert.Contains(t, out, `event Warning InvalidManifest`, "a broken manifest is reported")
	assert.Contains(t, out, `unknown field "comand"`)
}

func TestOrphansOfAnEarlierRunAreKilled(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	opts.untilIdle = true

	// An earlier run left a pod running that config no longer has.
	earlier, err := processruntime.Open(processruntime.Options{StateDir: filepath.Join(opts.stateDir, "runtime")})
	require.NoError(t, err)
	orphan := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "forgotten", Namespace: "default", UID: types.UID("orphan-" + time.Now().Format("150405.000000000"))},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Command: []string{"sleep", "300"}}}},
	}
	_, err = earlier.SyncPod(context.Background(), podworker.SyncPodCreate, orphan, nil, processruntime.PodStatus{})
	require.NoError(t, err)
	require.NoError(t, earlier.Close())
	t.Cleanup(func() { requireNoProcess(t, earlier, orphan.UID) })

	a, out, _, wait := startAgent(t, opts)
	require.NoError(t, wait(), "output:\n%s", out.String())
	assert.Contains(t, out.String(), "default/forgotten               absent → termination-requested       left over from a previous run: killing it, grace 1s")
	requireNoProcess(t, a.rt, orphan.UID)
	assert.Empty(t, a.rt.RuntimePods())
}

func TestFlagsAndStartupErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"--bogus"}, exitUsage, "flag provided but not defined: -bogus"},
		{"argument", []string{"extra"}, exitUsage, `unexpected argument "extra"`},
		{"missing manifests", []string{"--manifests", "/nonexistent/manifests"}, exitUsage, "--manifests: cannot read the directory: open /nonexistent/manifests: no such file or directory"},
		{"manifests is a file", []string{"--manifests", file}, exitUsage, "--manifests: cannot read the directory"},
		{"until-idle alone", []string{"--until-idle"}, exitUsage, "--until-idle needs --manifests"},
		{"bad node name", []string{"--node-name", "Bad_Node"}, exitUsage, `--node-name "Bad_Node"`},
		{"bad duration", []string{"--shutdown-grace", "0s"}, exitUsage, "--shutdown-grace must be positive"},
		{"empty state dir", []string{"--state-dir", ""}, exitUsage, "--state-dir must not be empty"},
		{"state dir is a file", []string{"--state-dir", file, "--manifests", t.TempDir()}, exitFailed, "state directory: mkdir " + file},
		{"bad listen address", []string{"--listen", "256.0.0.1:x", "--manifests", t.TempDir(), "--state-dir", t.TempDir()}, exitFailed, "--listen 256.0.0.1:x"},
		{"help", []string{"-h"}, exitOK, "Usage: nodeagent [flags]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), tc.want)
			assert.Empty(t, stdout.String(), "nothing ran")
		})
	}
}

func TestStateDirectoryInUse(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	startAgent(t, opts)
	var stdout, stderr syncBuffer
	code := run(context.Background(), []string{"--state-dir", opts.stateDir, "--manifests", opts.manifests}, &stdout, &stderr)
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, stderr.String(), "is in use by another runtime")
}

// The plain demo (no --state-dir) runs in a directory of its own and
// removes it, so a second run starts as clean as the first.
func TestDemoWithoutStateDirLeavesNothingBehind(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for run1 := range 2 {
		var stdout, stderr syncBuffer
		code := run(context.Background(), nil, &stdout, &stderr)
		require.Equal(t, exitOK, code, "run %d; stderr:\n%s", run1+1, stderr.String())
		assert.Regexp(t, `state in `+regexp.QuoteMeta(tmp)+`/podkit-demo-\d+`, stdout.String())
		assert.Regexp(t, `default/static-web-podkit-node +Succeeded +0 `, stdout.String(), "run %d: the static pod starts fresh, without restarts of an earlier run", run1+1)
		left, err := os.ReadDir(tmp)
		require.NoError(t, err)
		assert.Empty(t, left, "run %d left its state behind", run1+1)
	}
}

func TestDemoNeedsItsCommands(t *testing.T) {
	t.Setenv("PATH", "/nonexistent-bin")
	var stdout, stderr syncBuffer
	code := run(context.Background(), []string{"--state-dir", t.TempDir()}, &stdout, &stderr)
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, stderr.String(), `nodeagent: the demo needs "sh", which is missing: command "sh" not found in PATH "/nonexistent-bin"`)
}

// Static pods the kubelet would refuse are refused with an event, and
// never run; the valid one beside them runs.
func TestInvalidStaticPodsAreRejected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pod := func(name, namespace, container, annotation string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %q, namespace: %q, annotations: {note: %q}}
spec:
  restartPolicy: Never
  containers:
  - {name: %q, image: example.com/x, command: [sh, -c, "echo ran"]}
`, name, namespace, annotation, container)
	}
	writeManifest(t, dir, "slash", pod("a/b", "default", "main", ""))
	writeManifest(t, dir, "dotdot", pod("..", "default", "main", ""))
	writeManifest(t, dir, "namespace", pod("escape", "../../tmp/x", "main", ""))
	writeManifest(t, dir, "container", pod("long", "default", strings.Repeat("c", 300), ""))
	writeManifest(t, dir, "annotation", pod("big", "default", "main", strings.Repeat("x", 300<<10)))
	writeManifest(t, dir, "valid", pod("valid", "default", "main", ""))
	var stdout, stderr syncBuffer
	code := run(context.Background(), []string{"--manifests", dir, "--until-idle", "--state-dir", t.TempDir(), "--node-name", "strict-node"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	out := stdout.String()
	assert.Equal(t, 5, strings.Count(out, "event Warning InvalidManifest"), out)
	for _, want := range []string{
		`metadata.name: Invalid value: "a/b-strict-node"`,
		`metadata.name: Invalid value: "..-strict-node"`,
		`metadata.namespace: Invalid value: "../../tmp/x"`,
		"spec.containers[0].name: Invalid value",
		"metadata.annotations: Too long",
	} {
		assert.Contains(t, out, want)
	}
	assert.Regexp(t, `default/valid-strict-node +Succeeded +0 +main=0`, out)
	assert.Equal(t, 1, strings.Count(out, "· container main started"), "only the valid pod ran")
}
