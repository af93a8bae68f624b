package kube_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/kube/clustertest"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// testAgent is a podkit agent running in the test process with the
// credentials of its node (system:node:<name>).
type testAgent struct {
	agent *agent.Agent
	stop  context.CancelFunc
	done  chan error
}

// startAgent runs an agent for node with the node's identity, on stateDir
// and, if not empty, manifestDir. It is stopped when t ends, if not before.
func startAgent(t *testing.T, c *cluster, node, stateDir, manifestDir string) *testAgent {
	t.Helper()
	return runAgent(t, nodeAgentConfig(t, c, node, stateDir, manifestDir))
}

// hostFilesAgent is startAgent with the pods outside a sandbox, in the
// host's /tmp: for tests whose pods share host directories with them
// (files they wait for and write).
func hostFilesAgent(t *testing.T, c *cluster, node, stateDir, manifestDir string) *testAgent {
	t.Helper()
	cfg := nodeAgentConfig(t, c, node, stateDir, manifestDir)
	cfg.Sandbox = processruntime.SandboxOff
	return runAgent(t, cfg)
}

// nodeAgentConfig is the configuration of startAgent's agent.
func nodeAgentConfig(t *testing.T, c *cluster, node, stateDir, manifestDir string) agent.Config {
	return agent.Config{
		Client:      c.nodeClient(t, node),
		NodeName:    node,
		StateDir:    stateDir,
		ManifestDir: manifestDir,
	}
}

// testPodCIDRs counts the pod ranges nextTestPodCIDR handed out.
var testPodCIDRs atomic.Uint32

// testPodCIDRBase is this test process's 10.x.0.0/16 (x from 192 to
// 223, apart from the ranges clustertest picks), of which each agent of
// runAgent gets a /24.
var testPodCIDRBase = byte(192 + rand.IntN(32))

// nextTestPodCIDR is a pod range no other agent of this process has.
func nextTestPodCIDR() netip.Prefix {
	n := testPodCIDRs.Add(1)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, testPodCIDRBase, byte(n), 0}), 24)
}

// runAgent runs an agent with cfg, in which it sets the test's defaults
// (fast manifest reads and housekeeping, the test's logger) for the fields
// cfg leaves zero. It is stopped when t ends, if not before.
func runAgent(t *testing.T, cfg agent.Config) *testAgent {
	t.Helper()
	if cfg.ManifestInterval == 0 {
		cfg.ManifestInterval = 100 * time.Millisecond
	}
	if cfg.HousekeepingInterval == 0 {
		cfg.HousekeepingInterval = 100 * time.Millisecond
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = testr.NewWithOptions(t, testr.Options{LogTimestamp: true})
	}
	// Sandboxed where the machine allows it, as a real node, on a pod
	// network of the agent's own (the API server of these tests assigns
	// no spec.podCIDR). Tests whose pods share host directories with them
	// (files they wait for and write, under /tmp, which a sandboxed pod
	// has of its own) ask for SandboxOff (hostFilesAgent).
	if cfg.Sandbox != processruntime.SandboxOff && !cfg.PodCIDR.IsValid() && !cfg.PodCIDRFromNode {
		cfg.PodCIDR = nextTestPodCIDR()
	}
	a, err := agent.New(cfg)
	require.NoError(t, err)
	// Registered before the agent's stop, so it runs after it: nothing of
	// the agent's pods outlives the test, their processes (which outlive an
	// agent by design), their cgroups nor their network.
	t.Cleanup(func() {
		if err := clustertest.StopPodProcesses(cfg.StateDir); err != nil {
			t.Errorf("stopping what the agent's pods left: %v", err)
		}
		if err := processruntime.RemoveNetwork(context.Background(), cfg.StateDir); err != nil {
			t.Errorf("removing the agent's pod network: %v", err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	ta := &testAgent{agent: a, stop: cancel, done: make(chan error, 1)}
	go func() { ta.done <- a.Run(ctx) }()
	t.Cleanup(func() { ta.Stop(t) })
	return ta
}

// Stop stops the agent and waits for Run to return, which it must do
// cleanly. It may be called more than once.
func (a *testAgent) Stop(t *testing.T) {
	t.Helper()
	a.stop()
	select {
	case err, ok := <-a.done:
		if ok {
			require.NoError(t, err, "the agent's Run")
			close(a.done)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the agent did not stop")
	}
}

// workers returns the agent's pod workers.
func (a *testAgent) workers(t *testing.T) *podworker.PodWorkers[processruntime.PodStatus] {
	t.Helper()
	return a.agent.Workers()
}

// waitWorker waits until cond holds for the agent's worker of uid.
func (a *testAgent) waitWorker(t *testing.T, uid types.UID, what string, cond func(info podworker.PodInfo, ok bool) bool) podworker.PodInfo {
	t.Helper()
	info, _, err := a.workers(t).WaitFor(testContext(t), uid, cond)
	require.NoError(t, err, "waiting for the worker of %s: %s", uid, what)
	return info
}

// processesOf returns the live processes of the pod uid.
func processesOf(t *testing.T, uid types.UID) []processruntime.Process {
	t.Helper()
	procs, err := processruntime.ScanProcesses(func(u string) bool { return u == string(uid) })
	require.NoError(t, err)
	return procs
}

// mainProcesses returns the containers' main processes of the pod uid (the
// leaders of their process groups), which live as long as the containers.
// Their children (a shell's sleep) come and go.
func mainProcesses(t *testing.T, uid types.UID) []processruntime.Process {
	t.Helper()
	var out []processruntime.Process
	for _, p := range processesOf(t, uid) {
		if p.Leader {
			out = append(out, p)
		}
	}
	return out
}

// killAtEnd makes sure no process of pod uid outlives the test, whatever
// the test left running.
func killAtEnd(t *testing.T, uid types.UID) {
	t.Cleanup(func() {
		procs, _ := processruntime.ScanProcesses(func(u string) bool { return u == string(uid) })
		for _, p := range procs {
			_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
		}
	})
}

// shell returns a container command running script with sh, with $D set
// to dir.
func shell(dir, script string) []string {
	return []string{"/bin/sh", "-c", "D=" + dir + "; " + script}
}

// waitForFile waits until the container script touches path: the scripts
// that trap SIGTERM do once the trap is set, since a SIGTERM before that
// would end them with 143 instead of running their handler.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	})
	require.NoError(t, err, "waiting for %s", path)
}

// lines returns the lines of a file, none if it does not exist.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(string(b))
}

// watchPod watches the pod name in the default namespace from now on.
func watchPod(t *testing.T, c *cluster, name string) watch.Interface {
	t.Helper()
	w, err := c.admin.CoreV1().Pods("default").Watch(testContext(t), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	return w
}

func isPhase(phase v1.PodPhase) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool { return p != nil && p.Status.Phase == phase }
}

func createPod(t *testing.T, c *cluster, pod *v1.Pod) *v1.Pod {
	t.Helper()
	created, err := c.admin.CoreV1().Pods(pod.Namespace).Create(testContext(t), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	killAtEnd(t, created.UID)
	return created
}

// testAgentPodLifecycle: a pod created for the node goes Pending, Running,
// Succeeded in the API server, each step written by the agent.
func testAgentPodLifecycle(t *testing.T, c *cluster) {
	const node = "lifecycle-node"
	dir := t.TempDir()
	cfg := nodeAgentConfig(t, c, node, t.TempDir(), "")
	cfg.Sandbox = processruntime.SandboxOff // as hostFilesAgent
	var syncsMu sync.Mutex
	syncs := map[types.UID][]podworker.UpdateType{}
	cfg.Trace = func(p agent.PodTrace) {
		if p.Stage == agent.TraceSyncStarted {
			syncsMu.Lock()
			syncs[p.UID] = append(syncs[p.UID], p.Update)
			syncsMu.Unlock()
		}
	}
	a := runAgent(t, cfg)

	w := watchPod(t, c, "life")
	pod := createPod(t, c, apiPod("life", node, shell(dir, `echo $$ >> $D/runs; while [ ! -e $D/go ]; do sleep 0.05; done; exit 0`)...))

	var phases []v1.PodPhase
	var final *v1.Pod
	_, err := watchtools.UntilWithoutRetry(testContext(t), w, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*v1.Pod)
		if !ok {
			return false, nil
		}
		changed := len(phases) == 0 || phases[len(phases)-1] != p.Status.Phase
		if changed {
			phases = append(phases, p.Status.Phase)
		}
		switch p.Status.Phase {
		case v1.PodRunning:
			if changed {
				// The process runs when the API server first says so:
				// let it end. (Later events may still say Running with
				// the container terminated: the phase waits until the
				// agent knows nothing of the pod runs.)
				require.NotEmpty(t, processesOf(t, pod.UID), "Running in the API server, running on the node")
				// One SyncPod started it and reported it running: its
				// start asked for no second one.
				syncsMu.Lock()
				assert.Equal(t, []podworker.UpdateType{podworker.SyncPodCreate}, syncs[pod.UID], "the SyncPods until Running")
				syncsMu.Unlock()
				require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o600))
			}
		case v1.PodSucceeded:
			final = p
			return true, nil
		}
		return false, nil
	})
	require.NoError(t, err)
	assert.Equal(t, []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded}, phases)
	require.Len(t, final.Status.ContainerStatuses, 1)
	term := final.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term, "the container is terminated: %v", final.Status.ContainerStatuses[0].State)
	assert.Equal(t, int32(0), term.ExitCode)
	assert.Empty(t, processesOf(t, pod.UID), "nothing runs once Succeeded")
	assert.Len(t, lines(t, filepath.Join(dir, "runs")), 1, "the container ran once")

	// The pod stays in the API server (it was not deleted) and the worker
	// finishes.
	a.waitWorker(t, pod.UID, "finished", func(info podworker.PodInfo, ok bool) bool { return ok && info.Finished })
	_, err = c.admin.CoreV1().Pods("default").Get(testContext(t), pod.Name, metav1.GetOptions{})
	require.NoError(t, err)

	// The Node was registered and is kept Ready.
	waitForNodeReady(t, c, node)
}

// waitForNodeReady waits until node has a Ready=True condition.
func waitForNodeReady(t *testing.T, c *cluster, node string) {
	t.Helper()
	ctx := testContext(t)
	w, err := c.admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	require.NoError(t, err)
	defer w.Stop()
	n, err := c.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err == nil && nodeReady(n) {
		return
	}
	_, err = watchtools.UntilWithoutRetry(ctx, w, func(ev watch.Event) (bool, error) {
		n, ok := ev.Object.(*v1.Node)
		return ok && nodeReady(n), nil
	})
	require.NoError(t, err, "node %s never became Ready", node)
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// testAgentGracefulDelete: a pod deleted with a grace period leaves the API
// server only after its process has stopped, with its final status written
// first.
func testAgentGracefulDelete(t *testing.T, c *cluster) {
	const node = "graceful-node"
	dir := t.TempDir()
	hostFilesAgent(t, c, node, t.TempDir(), "")

	// On SIGTERM the container takes a second to shut down, then exits 0.
	pod := createPod(t, c, apiPod("graceful", node, shell(dir,
		`trap 'sleep 1; touch $D/stopped; exit 0' TERM; touch $D/trapped; while true; do sleep 0.05; done`)...))
	waitForPod(t, c.admin, "default", pod.Name, "Running", isPhase(v1.PodRunning))
	waitForFile(t, filepath.Join(dir, "trapped"))
	require.NotEmpty(t, processesOf(t, pod.UID))

	w := watchPod(t, c, pod.Name)
	require.NoError(t, c.admin.CoreV1().Pods("default").Delete(testContext(t), pod.Name, metav1.DeleteOptions{}))

	var sawDeletionTimestamp bool
	var last *v1.Pod
	_, err := watchtools.UntilWithoutRetry(testContext(t), w, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*v1.Pod)
		if !ok {
			return false, nil
		}
		if ev.Type != watch.Deleted {
			sawDeletionTimestamp = sawDeletionTimestamp || p.DeletionTimestamp != nil
			last = p
			return false, nil
		}
		// The pod is gone from the API server: its process must be gone.
		assert.FileExists(t, filepath.Join(dir, "stopped"), "the container finished its shutdown first")
		assert.Empty(t, processesOf(t, pod.UID), "no process of the pod runs")
		return true, nil
	})
	require.NoError(t, err)
	assert.True(t, sawDeletionTimestamp, "the deletion was graceful")
	require.NotNil(t, last)
	assert.Equal(t, v1.PodSucceeded, last.Status.Phase, "the final status (exit 0 after SIGTERM) was written before the pod was removed")
}

// testAgentForceDelete: a pod deleted with grace 0 is gone from the API
// server at once; the agent still stops its process.
func testAgentForceDelete(t *testing.T, c *cluster) {
	const node = "force-node"
	dir := t.TempDir()
	a := hostFilesAgent(t, c, node, t.TempDir(), "")

	pod := createPod(t, c, apiPod("forced", node, shell(dir, `while true; do sleep 0.05; done`)...))
	waitForPod(t, c.admin, "default", pod.Name, "Running", isPhase(v1.PodRunning))
	require.NotEmpty(t, processesOf(t, pod.UID))

	require.NoError(t, c.admin.CoreV1().Pods("default").Delete(testContext(t), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	_, err := c.admin.CoreV1().Pods("default").Get(testContext(t), pod.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a force delete is immediate: %v", err)

	a.waitWorker(t, pod.UID, "terminated", func(info podworker.PodInfo, ok bool) bool {
		return !ok || info.Stage >= podworker.StageTerminated
	})
	assert.Empty(t, processesOf(t, pod.UID), "the process was stopped")
	// The pod is gone from the API server (a node may not even read it
	// there): there is no final status to write, and cleanup goes on.
	a.waitWorker(t, pod.UID, "cleaned up", func(info podworker.PodInfo, ok bool) bool { return !ok || info.Finished })
}

// testAgentStaticPod: a static pod from a manifest folder gets a mirror pod;
// a mirror pod deleted by hand is created again (the static pod keeps
// running); removing the manifest deletes the mirror pod and stops the pod.
func testAgentStaticPod(t *testing.T, c *cluster) {
	const node = "static-node"
	dir := t.TempDir()
	manifests := t.TempDir()
	manifest := filepath.Join(manifests, "web.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  containers:
  - name: main
    image: none
    command: ["/bin/sh", "-c", "echo $$ >> `+dir+`/runs; while true; do sleep 0.05; done"]
`), 0o600))
	a := hostFilesAgent(t, c, node, t.TempDir(), manifests)
	mirrorName := "web-" + node

	first := waitForPod(t, c.admin, "default", mirrorName, "a Running mirror pod", isPhase(v1.PodRunning))
	require.True(t, mirror.IsMirrorPod(first))
	staticUID := types.UID(first.Annotations[mirror.ConfigMirrorAnnotationKey])
	killAtEnd(t, staticUID)
	node0, err := c.admin.CoreV1().Nodes().Get(testContext(t), node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: node0.UID, Controller: ptr.To(true)}},
		first.OwnerReferences)
	procs := mainProcesses(t, staticUID)
	require.NotEmpty(t, procs, "the static pod runs")
	// Its events are the static pod's, where kubectl describe of the
	// mirror pod looks for them (the UID of its mirror annotation).
	waitForEvent(t, c.admin, "default", string(staticUID), eventMatch{v1.EventTypeNormal, "Started", "spec.containers{main}", "Container started", 0})
	assert.Contains(t, describePod(t, c.admin, "default", mirrorName), "Container started")

	// Delete the mirror pod by hand, as kubectl would (gracefully).
	require.NoError(t, c.admin.CoreV1().Pods("default").Delete(testContext(t), mirrorName, metav1.DeleteOptions{}))
	second := waitForPod(t, c.admin, "default", mirrorName, "a new mirror pod", func(p *v1.Pod) bool {
		return p != nil && p.UID != first.UID && p.DeletionTimestamp == nil && p.Status.Phase == v1.PodRunning
	})
	assert.True(t, mirror.IsMirrorPod(second))
	assert.Equal(t, procs, mainProcesses(t, staticUID), "the static pod was not restarted")
	assert.Len(t, lines(t, filepath.Join(dir, "runs")), 1)

	// Remove the manifest: the pod stops and its mirror goes.
	require.NoError(t, os.Remove(manifest))
	waitForPod(t, c.admin, "default", mirrorName, "the mirror pod deleted", func(p *v1.Pod) bool { return p == nil })
	a.waitWorker(t, staticUID, "terminated", func(info podworker.PodInfo, ok bool) bool {
		return !ok || info.Stage >= podworker.StageTerminated
	})
	assert.Empty(t, processesOf(t, staticUID))
}

// testAgentRestart: an agent restarted mid-lifecycle loses nothing: a
// running pod is not restarted, a finished pod is not run again, and a pod
// deleted while the agent was down completes its deletion.
func testAgentRestart(t *testing.T, c *cluster) {
	const node = "restart-node"
	stateDir := t.TempDir()
	longDir, shortDir, doomedDir := t.TempDir(), t.TempDir(), t.TempDir()
	first := hostFilesAgent(t, c, node, stateDir, "")

	long := createPod(t, c, apiPod("long", node, shell(longDir, `echo $$ >> $D/runs; while true; do sleep 0.05; done`)...))
	short := createPod(t, c, apiPod("short", node, shell(shortDir, `echo $$ >> $D/runs; exit 0`)...))
	doomed := createPod(t, c, apiPod("doomed", node, shell(doomedDir,
		`echo $$ >> $D/runs; trap 'touch $D/stopped; exit 0' TERM; touch $D/trapped; while true; do sleep 0.05; done`)...))
	longRunning := waitForPod(t, c.admin, "default", long.Name, "Running", isPhase(v1.PodRunning))
	waitForPod(t, c.admin, "default", short.Name, "Succeeded", isPhase(v1.PodSucceeded))
	waitForPod(t, c.admin, "default", doomed.Name, "Running", isPhase(v1.PodRunning))
	waitForFile(t, filepath.Join(doomedDir, "trapped"))
	first.waitWorker(t, short.UID, "finished", func(info podworker.PodInfo, ok bool) bool { return ok && info.Finished })
	longProcs := mainProcesses(t, long.UID)
	require.NotEmpty(t, longProcs)

	first.Stop(t)
	assert.Equal(t, longProcs, mainProcesses(t, long.UID), "the agent's processes outlive it")

	// While the agent is down, doomed is deleted: the API server can only
	// mark it.
	w := watchPod(t, c, doomed.Name)
	require.NoError(t, c.admin.CoreV1().Pods("default").Delete(testContext(t), doomed.Name, metav1.DeleteOptions{}))

	second := hostFilesAgent(t, c, node, stateDir, "")

	// doomed completes its deletion, after its process stopped.
	_, err := watchtools.UntilWithoutRetry(testContext(t), w, func(ev watch.Event) (bool, error) {
		if ev.Type != watch.Deleted {
			return false, nil
		}
		assert.FileExists(t, filepath.Join(doomedDir, "stopped"))
		assert.Empty(t, processesOf(t, doomed.UID))
		return true, nil
	})
	require.NoError(t, err)

	// long was synced by the new agent and left running as it was.
	second.waitWorker(t, long.UID, "synced", func(info podworker.PodInfo, ok bool) bool {
		return ok && info.Started && !info.Working
	})
	assert.Equal(t, longProcs, mainProcesses(t, long.UID), "the running pod was not restarted")
	assert.Len(t, lines(t, filepath.Join(longDir, "runs")), 1)
	now, err := c.admin.CoreV1().Pods("default").Get(testContext(t), long.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1.PodRunning, now.Status.Phase)
	require.Len(t, now.Status.ContainerStatuses, 1)
	assert.Equal(t, longRunning.Status.ContainerStatuses[0].ContainerID, now.Status.ContainerStatuses[0].ContainerID)
	assert.Zero(t, now.Status.ContainerStatuses[0].RestartCount)

	// short is finished for the new agent too, and was not run again.
	second.waitWorker(t, short.UID, "finished", func(info podworker.PodInfo, ok bool) bool { return ok && info.Finished })
	assert.Len(t, lines(t, filepath.Join(shortDir, "runs")), 1, "the finished pod was not re-run")
	now, err = c.admin.CoreV1().Pods("default").Get(testContext(t), short.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1.PodSucceeded, now.Status.Phase)

	// The new agent stops the process it adopted when its pod is deleted.
	// (This also ends the test with nothing running: the first agent's
	// runtime still waits for the processes it started, since they are
	// children of this test process, and records their exit in the state
	// directory.)
	w = watchPod(t, c, long.Name)
	require.NoError(t, c.admin.CoreV1().Pods("default").Delete(testContext(t), long.Name, metav1.DeleteOptions{}))
	_, err = watchtools.UntilWithoutRetry(testContext(t), w, func(ev watch.Event) (bool, error) {
		if ev.Type != watch.Deleted {
			return false, nil
		}
		assert.Empty(t, processesOf(t, long.UID))
		return true, nil
	})
	require.NoError(t, err)
}

// testAgentRejects: a pod the process runtime cannot run is rejected at
// admission and marked Failed in the API server, with the reason.
func testAgentRejects(t *testing.T, c *cluster) {
	const node = "reject-node"
	startAgent(t, c, node, t.TempDir(), "")
	refused := apiPod("selinux", node, "true")
	refused.Spec.SecurityContext = &v1.PodSecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c1,c2"}} // the process runtime applies no SELinux label
	pod := createPod(t, c, refused)
	got := waitForPod(t, c.admin, "default", pod.Name, "Failed", isPhase(v1.PodFailed))
	assert.Equal(t, agent.ReasonUnsupportedPod, got.Status.Reason)
	assert.Contains(t, got.Status.Message, "seLinuxOptions")
}
