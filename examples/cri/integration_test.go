package cri_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/examples/internal/containerdtest"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/podmanager"
	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// realEnv is a Syncer over a real containerd, driven by a real engine
// through a thin wrapper that records when hooks return and keeps each
// pod's container logs before SyncTerminatedPod removes them.
type realEnv struct {
	cd     *containerdtest.Containerd
	syncer *cri.Syncer
	w      *podworker.PodWorkers[*cri.PodStatus]
	logDir string

	mu sync.Mutex
	// firstSynced: when the first SyncPod of a pod returned without error;
	// synced[uid] is closed then.
	firstSynced map[types.UID]time.Time
	synced      map[types.UID]chan struct{}
	// terminated: when SyncTerminatingPod of a pod returned without error.
	terminated map[types.UID]time.Time
	// logs: the pod's container logs, read before SyncTerminatedPod.
	logs map[types.UID]string
	// final: the last API status reported for the pod.
	final map[types.UID]v1.PodStatus
}

const busybox = containerdtest.BusyboxImage

func TestContainerd(t *testing.T) {
	cd := containerdtest.Start(t)
	e := &realEnv{
		cd:          cd,
		logDir:      filepath.Join(cd.Dir, "logs"),
		firstSynced: map[types.UID]time.Time{},
		synced:      map[types.UID]chan struct{}{},
		terminated:  map[types.UID]time.Time{},
		logs:        map[types.UID]string{},
		final:       map[types.UID]v1.PodStatus{},
	}
	var err error
	e.syncer, err = cri.New(cd.Client, cd.Client, cri.Options{
		Images:            cd.Client,
		LogDirectory:      e.logDir,
		NodeIPs:           nodeIPs(),
		RuntimeName:       "containerd",
		RestartBackOff:    200 * time.Millisecond,
		MaxRestartBackOff: time.Second,
		OnStatus: func(pod *v1.Pod, s v1.PodStatus) {
			e.mu.Lock()
			e.final[pod.UID] = s
			e.mu.Unlock()
		},
	})
	require.NoError(t, err)
	e.w = e.newWorkers(t)

	t.Run("HostNetworkPodLifecycle", func(t *testing.T) { e.lifecycle(t, true) })
	t.Run("BridgePodLifecycle", func(t *testing.T) { e.lifecycle(t, false) })
	t.Run("GracePeriodIsTheStopTimeout", e.gracePeriod)
	t.Run("InitContainersAndTerminalPhase", e.initAndTerminal)
	t.Run("CrashingContainerRestarts", e.restarts)
	t.Run("MissingImage", e.missingImage)
	t.Run("OrphanKilledByHousekeeping", e.orphan)
	t.Run("Conformance", e.conformance)
}

// conformance runs podworkertest's syncer conformance suite against the
// real runtime, with a fresh Syncer per check (no log directory, default
// back-off). Stopping a real container is a chain of processes (the shim,
// runc, the sandbox's network teardown): on a loaded machine it overran the
// default 2 s of Tolerance once, and 5 s beside two CPU hogs, so the real
// runtime gets 15 s (still half the 30 s grace periods the suite tells
// apart from a prompt stop).
func (e *realEnv) conformance(t *testing.T) {
	start := time.Now()
	podworkertest.RunConformance(t, func(t *testing.T) podworkertest.ConformanceTarget[*cri.PodStatus] {
		s, err := cri.New(e.cd.Client, e.cd.Client, cri.Options{Images: e.cd.Client, RuntimeName: "containerd"})
		require.NoError(t, err)
		return podworkertest.ConformanceTarget[*cri.PodStatus]{
			Syncer:    s,
			Status:    s,
			Probe:     trappedProbe(e.cd.Client),
			Tolerance: 15 * time.Second,
			Containers: podworkertest.ConformanceContainers{
				LongRunning: v1.Container{Image: busybox, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}},
				IgnoresTerm: v1.Container{Image: busybox, Command: []string{"sh", "-c", "trap '' TERM; : > /trapped; sleep 3600 & wait"}},
				Succeeds:    v1.Container{Image: busybox, Command: []string{"true"}},
			},
		}
	})
	t.Logf("TIMING conformance suite against containerd: %v", time.Since(start).Round(time.Millisecond))
	pods, err := e.syncer.ListRuntimePods(testContext(t))
	require.NoError(t, err)
	assert.Empty(t, pods, "the suite left pods behind")
}

// trappedProbe is criProbe, except that the suite's SIGTERM-ignoring
// container ("stubborn") counts as running only once its shell has set its
// trap (it then creates /trapped): a SIGTERM sent before that would end it
// early, and the grace-period checks would be racing the shell.
func trappedProbe(c *cri.Client) podworkertest.Probe {
	base := criProbe(c)
	return podworkertest.ProbeFunc(func(ctx context.Context, uid types.UID) (map[string]string, error) {
		running, err := base.Running(ctx, uid)
		if err != nil {
			return nil, err
		}
		if v, ok := running["stubborn"]; ok {
			id, _, _ := strings.Cut(v, "@")
			if _, _, err := c.ExecSync(ctx, id, []string{"sh", "-c", "[ -e /trapped ]"}, 5*time.Second); err != nil {
				delete(running, "stubborn")
			}
		}
		return running, nil
	})
}

// newWorkers starts an engine over the recording wrapper, stopped when t
// ends.
func (e *realEnv) newWorkers(t *testing.T) *podworker.PodWorkers[*cri.PodStatus] {
	s := e.syncer
	syncer := podworker.PodSyncerFuncs[*cri.PodStatus]{
		SyncPodFunc: func(ctx context.Context, ut podworker.UpdateType, pod, mirror *v1.Pod, st *cri.PodStatus) (bool, error) {
			terminal, err := s.SyncPod(ctx, ut, pod, mirror, st)
			e.mu.Lock()
			if _, ok := e.firstSynced[pod.UID]; !ok && err == nil {
				e.firstSynced[pod.UID] = time.Now()
				close(e.syncedChLocked(pod.UID))
			}
			e.mu.Unlock()
			return terminal, err
		},
		SyncTerminatingPodFunc: func(ctx context.Context, pod *v1.Pod, st *cri.PodStatus, grace int64, fn func(*v1.PodStatus)) error {
			err := s.SyncTerminatingPod(ctx, pod, st, grace, fn)
			if err == nil {
				e.mu.Lock()
				e.terminated[pod.UID] = time.Now()
				e.mu.Unlock()
			}
			return err
		},
		SyncTerminatedPodFunc: func(ctx context.Context, pod *v1.Pod, st *cri.PodStatus) error {
			var logs strings.Builder
			files, _ := filepath.Glob(filepath.Join(e.logDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), "*", "*.log"))
			for _, f := range files {
				b, _ := os.ReadFile(f)
				logs.Write(b)
			}
			e.mu.Lock()
			e.logs[pod.UID] = logs.String()
			e.mu.Unlock()
			return s.SyncTerminatedPod(ctx, pod, st)
		},
		SyncTerminatingRuntimePodFunc: s.SyncTerminatingRuntimePod,
	}
	w, err := podworker.New[*cri.PodStatus](syncer, podworker.Options[*cri.PodStatus]{
		Status:         s,
		ResyncInterval: 300 * time.Millisecond,
		BackOff:        100 * time.Millisecond,
		MaxBackOff:     time.Second,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return w
}

// lifecycle creates a pod whose container traps SIGTERM, checks it runs
// with the right network, deletes it with a grace period, and checks the
// trap ran, the pod ended Succeeded, and nothing of it is left.
func (e *realEnv) lifecycle(t *testing.T, hostNet bool) {
	ctx := testContext(t)
	name := map[bool]string{true: "host-net", false: "bridge-net"}[hostNet]
	pod := realPod(name, "trap 'echo got SIGTERM; exit 0' TERM; echo started; sleep 1000 & wait")
	pod.Spec.HostNetwork = hostNet

	created := time.Now()
	require.NoError(t, e.w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod, StartTime: created}))
	running := e.waitSynced(t, ctx, pod.UID)
	t.Logf("TIMING %s pod: create -> running %v", name, running.Sub(created).Round(time.Millisecond))

	st, err := e.syncer.PodStatus(ctx, pod.UID, time.Time{})
	require.NoError(t, err)
	sb := st.ReadySandbox()
	require.NotNil(t, sb)
	require.Len(t, st.Containers, 1)
	require.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, st.Containers[0].GetState())
	api := st.APIStatus(pod)
	assert.Equal(t, v1.PodRunning, api.Phase)
	hostname, _ := os.Hostname()
	out, _, err := e.cd.Client.ExecSync(ctx, st.Containers[0].GetId(), []string{"hostname"}, 10*time.Second)
	require.NoError(t, err)
	if hostNet {
		assert.Equal(t, runtimeapi.NamespaceMode_NODE, sb.GetLinux().GetNamespaces().GetOptions().GetNetwork())
		assert.Empty(t, st.IPs(), "a host-network sandbox has no address of its own")
		assert.Equal(t, hostname, strings.TrimSpace(string(out)), "the node's UTS namespace")
	} else {
		assert.Equal(t, runtimeapi.NamespaceMode_POD, sb.GetLinux().GetNamespaces().GetOptions().GetNetwork())
		_, subnet, _ := net.ParseCIDR(containerdtest.Subnet)
		require.NotEmpty(t, api.PodIP)
		assert.True(t, subnet.Contains(net.ParseIP(api.PodIP)), "pod IP %s from the CNI bridge's %s", api.PodIP, subnet)
		assert.Equal(t, name, strings.TrimSpace(string(out)), "the pod's hostname")
		addrs, _, err := e.cd.Client.ExecSync(ctx, st.Containers[0].GetId(), []string{"ip", "-4", "addr", "show", "eth0"}, 10*time.Second)
		require.NoError(t, err)
		assert.Contains(t, string(addrs), api.PodIP+"/24", "the container sees the pod IP")
	}

	// Delete with a 10 s grace period: the trap exits at once.
	deleted := pod.DeepCopy()
	now := metav1.Now()
	grace := int64(10)
	deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &now, &grace
	start := time.Now()
	require.NoError(t, e.w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: deleted, StartTime: start}))
	_, _, err = e.w.WaitFor(ctx, pod.UID, func(i podworker.PodInfo, ok bool) bool { return ok && i.Stage >= podworker.StageTerminated })
	require.NoError(t, err)
	e.mu.Lock()
	took := e.terminated[pod.UID].Sub(start)
	e.mu.Unlock()
	t.Logf("TIMING %s pod: delete (grace %ds) -> terminated %v", name, grace, took.Round(time.Millisecond))
	assert.Less(t, took, 5*time.Second, "SIGTERM was trapped: no wait for the grace period")

	e.waitFinished(t, ctx, pod.UID)
	e.mu.Lock()
	final, logs := e.final[pod.UID], e.logs[pod.UID]
	e.mu.Unlock()
	assert.Equal(t, v1.PodSucceeded, final.Phase)
	require.Len(t, final.ContainerStatuses, 1)
	require.NotNil(t, final.ContainerStatuses[0].State.Terminated)
	assert.Equal(t, int32(0), final.ContainerStatuses[0].State.Terminated.ExitCode, "the trap's exit code")
	assert.Contains(t, logs, "stdout F started")
	assert.Contains(t, logs, "stdout F got SIGTERM")
	e.assertGone(t, ctx, pod)
}

// gracePeriod kills a container that ignores SIGTERM: it is stopped after
// the grace period, with SIGKILL.
func (e *realEnv) gracePeriod(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("stubborn", "echo started; sleep 1000") // PID 1 ignores SIGTERM: it has no handler
	require.NoError(t, e.w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
	e.waitSynced(t, ctx, pod.UID)

	two := int64(2)
	start := time.Now()
	require.NoError(t, e.w.KillPod(ctx, pod, podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: &two}))
	took := time.Since(start)
	t.Logf("TIMING SIGTERM ignored: kill (grace 2s) -> terminated %v", took.Round(time.Millisecond))
	assert.GreaterOrEqual(t, took, 2*time.Second)
	assert.Less(t, took, 6*time.Second)
	e.waitFinished(t, ctx, pod.UID)
	e.mu.Lock()
	final := e.final[pod.UID]
	e.mu.Unlock()
	require.NotNil(t, final.ContainerStatuses[0].State.Terminated)
	assert.Equal(t, int32(137), final.ContainerStatuses[0].State.Terminated.ExitCode, "killed")
	assert.Equal(t, v1.PodFailed, final.Phase)
	e.assertGone(t, ctx, pod)
}

// initAndTerminal runs an init container to success, then a container that
// fails under restartPolicy Never: the pod is terminal, Failed with the
// exit code, and the engine cleans it up by itself.
func (e *realEnv) initAndTerminal(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("job", "echo main; exit 3")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: busybox, Command: []string{"sh", "-c", "echo init done"}}}
	require.NoError(t, e.w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
	e.waitFinished(t, ctx, pod.UID)
	e.mu.Lock()
	final, logs := e.final[pod.UID], e.logs[pod.UID]
	e.mu.Unlock()
	assert.Equal(t, v1.PodFailed, final.Phase)
	require.NotNil(t, final.InitContainerStatuses[0].State.Terminated)
	assert.Equal(t, int32(0), final.InitContainerStatuses[0].State.Terminated.ExitCode)
	require.NotNil(t, final.ContainerStatuses[0].State.Terminated)
	assert.Equal(t, int32(3), final.ContainerStatuses[0].State.Terminated.ExitCode)
	assert.Less(t, strings.Index(logs, "init done"), strings.Index(logs, "main"), "the init container ran first")
	e.assertGone(t, ctx, pod)
}

// restarts runs a container that exits at once under restartPolicy Always:
// it is restarted, with back-off, and the restart count goes up.
func (e *realEnv) restarts(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("crasher", "exit 1")
	require.NoError(t, e.w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
	var api v1.PodStatus
	poll(t, ctx, func() bool {
		st, err := e.syncer.PodStatus(ctx, pod.UID, time.Time{})
		require.NoError(t, err)
		api = st.APIStatus(pod)
		cs := api.ContainerStatuses[0]
		return cs.RestartCount >= 2 && cs.LastTerminationState.Terminated != nil
	})
	assert.Equal(t, int32(1), api.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode)
	assert.Equal(t, v1.PodRunning, api.Phase, "restartPolicy Always: it goes on")
	require.NoError(t, e.w.KillPod(ctx, pod, podworker.KillPodOptions{}))
	e.waitFinished(t, ctx, pod.UID)
	e.assertGone(t, ctx, pod)
}

// missingImage asks for an image that is not on the node.
func (e *realEnv) missingImage(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("no-image", "true")
	pod.Spec.Containers[0].Image = "podkit.test/not-here:1"
	_, err := e.syncer.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, nil)
	require.ErrorIs(t, err, cri.ErrImageNotPresent)
	assert.ErrorContains(t, err, `"podkit.test/not-here:1"`)
	require.NoError(t, e.syncer.SyncTerminatingPod(ctx, pod, nil, 1, nil))
	require.NoError(t, e.syncer.SyncTerminatedPod(ctx, pod, nil))
	e.assertGone(t, ctx, pod)
}

// orphan runs a pod behind the engine's back, as one left over from a
// previous run of the agent; housekeeping finds it with the lister and the
// engine kills it with SyncTerminatingRuntimePod.
func (e *realEnv) orphan(t *testing.T) {
	ctx := testContext(t)
	pod := realPod("orphan", "sleep 1000")
	_, err := e.syncer.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, nil)
	require.NoError(t, err)

	w := e.newWorkers(t)
	h, err := lifecycle.NewSyncLoop(w, podmanager.New(), lifecycle.SyncLoopOptions{RuntimePods: e.syncer})
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, h.Housekeeping(ctx))
	info, ok := w.Pod(pod.UID)
	require.True(t, ok, "housekeeping sent the orphan to the workers")
	assert.True(t, info.RuntimeOnly)
	_, _, err = w.WaitFor(ctx, pod.UID, func(_ podworker.PodInfo, ok bool) bool { return !ok })
	require.NoError(t, err)
	t.Logf("TIMING orphan: housekeeping -> killed and removed %v", time.Since(start).Round(time.Millisecond))
	e.assertGone(t, ctx, pod)
	pods, err := e.syncer.ListRuntimePods(ctx)
	require.NoError(t, err)
	assert.Empty(t, pods)
}

// waitSynced waits for the pod's first successful SyncPod and returns when
// it returned.
func (e *realEnv) waitSynced(t *testing.T, ctx context.Context, uid types.UID) time.Time {
	t.Helper()
	e.mu.Lock()
	ch := e.syncedChLocked(uid)
	e.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		require.FailNow(t, "the pod's first SyncPod did not succeed in time", "%s: %v", uid, ctx.Err())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.firstSynced[uid]
}

// syncedChLocked is the channel closed on uid's first successful SyncPod.
func (e *realEnv) syncedChLocked(uid types.UID) chan struct{} {
	ch, ok := e.synced[uid]
	if !ok {
		ch = make(chan struct{})
		e.synced[uid] = ch
	}
	return ch
}

// waitFinished waits for the pod's worker to finish its cleanup.
func (e *realEnv) waitFinished(t *testing.T, ctx context.Context, uid types.UID) {
	t.Helper()
	_, _, err := e.w.WaitFor(ctx, uid, func(i podworker.PodInfo, ok bool) bool { return ok && i.Finished })
	require.NoError(t, err)
}

// assertGone checks that containerd has nothing of the pod left, and its
// log directory is gone.
func (e *realEnv) assertGone(t *testing.T, ctx context.Context, pod *v1.Pod) {
	t.Helper()
	st, err := e.syncer.PodStatus(ctx, pod.UID, time.Time{})
	require.NoError(t, err)
	assert.Empty(t, st.Sandboxes)
	assert.Empty(t, st.Containers)
	_, err = os.Stat(filepath.Join(e.logDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)))
	assert.True(t, os.IsNotExist(err), "log directory removed")
}

// realPod is a pod with one busybox container running script.
func realPod(name, script string) *v1.Pod {
	grace := int64(5)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "integration", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "main", Image: busybox, Command: []string{"sh", "-c", script}}},
		},
	}
}

// poll calls cond every 20 ms until it holds; the runtime's state is
// another process's, so there is nothing to wait on but it.
func poll(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			require.FailNow(t, "condition not met in time", ctx.Err())
		case <-tick.C:
		}
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// nodeIPs are the machine's global unicast addresses.
func nodeIPs() []string {
	addrs, _ := net.InterfaceAddrs()
	var ips []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			ips = append(ips, n.IP.String())
		}
	}
	return ips
}
