package processruntime_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/podworker"
)

// The environment variables that turn the test binary into a stand-in for
// an earlier run of the agent (see TestMain).
const (
	envHelperStateDir = "PROCESSRUNTIME_TEST_AGENT_STATE"
	envHelperUID      = "PROCESSRUNTIME_TEST_AGENT_UID"
	// envHelperPod names the pod it runs: "survivor" (restartPod) or
	// "escaper" (escaperPod).
	envHelperPod = "PROCESSRUNTIME_TEST_AGENT_POD"
	// envHelperCgroups is its Options.Cgroups: "off" or "required".
	envHelperCgroups = "PROCESSRUNTIME_TEST_AGENT_CGROUPS"
	// envHelperSandbox set to "off" turns its sandboxes off.
	envHelperSandbox = "PROCESSRUNTIME_TEST_AGENT_SANDBOX"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envHelperStateDir); dir != "" {
		uid := types.UID(os.Getenv(envHelperUID))
		pod := restartPod(uid)
		switch {
		case os.Getenv(envHelperPod) == "escaper":
			pod = escaperPod(uid)
		case os.Getenv(envHelperLogging) != "":
			pod = loggingPod(uid)
		}
		mode := processruntime.CgroupsOff
		if os.Getenv(envHelperCgroups) == "required" {
			mode = processruntime.CgroupsRequired
		}
		sandbox := processruntime.SandboxAuto
		if os.Getenv(envHelperSandbox) == "off" {
			sandbox = processruntime.SandboxOff
		}
		os.Exit(previousAgent(processruntime.Options{StateDir: dir, Cgroups: mode, Sandbox: sandbox}, pod))
	}
	code := m.Run()
	dropStaleIDClaims()
	os.Exit(code)
}

// dropStaleIDClaims removes the claims of ID ranges (in the machine's
// registry) of this binary's tests whose state directories are gone: a
// test that ends with its pods killed rather than cleaned up leaves its
// claims, which later runtimes would take over only after a while.
func dropStaleIDClaims() {
	entries, _ := os.ReadDir(processruntime.DefaultIDRegistry)
	for _, e := range entries {
		path := filepath.Join(processruntime.DefaultIDRegistry, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		dir, _, _ := strings.Cut(string(b), "\n")
		if !strings.HasPrefix(dir, os.TempDir()+"/Test") && !strings.HasPrefix(dir, os.TempDir()+"/processruntime") {
			continue // not a test's
		}
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			_ = os.Remove(path)
		}
	}
}

// restartPod is the pod the previous agent runs: a plain process, and a
// shell that ignores SIGTERM with a child of its own.
func restartPod(uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "test", UID: uid},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{
				{Name: "plain", Command: []string{"sleep", "300"}},
				{Name: "stubborn", Command: []string{"sh", "-c", ignoresTerm}},
			},
		},
	}
}

// previousAgent starts pod's containers, says "ready" and waits to be
// killed, as an agent that crashes would.
func previousAgent(opts processruntime.Options, pod *v1.Pod) int {
	started := make(chan struct{}, len(pod.Spec.Containers))
	opts.OnEvent = func(ev processruntime.Event) {
		if ev.Type == processruntime.ContainerStarted {
			started <- struct{}{}
		}
	}
	rt, err := processruntime.Open(opts)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if _, err := rt.SyncPod(context.Background(), podworker.SyncPodCreate, pod, nil, processruntime.PodStatus{}); err != nil {
		fmt.Println(err)
		return 1
	}
	for range pod.Spec.Containers {
		<-started
	}
	fmt.Println("ready")
	select {}
}

// crashAgent runs a previous agent on dir in a subprocess, waits until its
// pod runs, and SIGKILLs it, leaving its processes orphaned. It returns
// the containers' main processes found afterwards.
func crashAgent(t *testing.T, dir string, uid types.UID) []processruntime.Process {
	t.Helper()
	return crashAgentWith(t, dir, uid, nil, 2)
}

// crashAgentWith is crashAgent with more environment for the previous
// agent, expecting its pod to have n containers.
func crashAgentWith(t *testing.T, dir string, uid types.UID, env []string, n int) []processruntime.Process {
	t.Helper()
	startPreviousAgent(t, dir, uid, env)
	found := leaders(t, uid, -1)
	if len(found) != n {
		t.Fatalf("after the previous agent was killed, %d main processes of pod %s run instead of %d: %+v\n%s", len(found), uid, n, found, diagnose(dir, uid))
	}
	return found
}

// startPreviousAgent runs a previous agent on dir in a subprocess, with
// env added to its environment (envHelperPod, envHelperCgroups,
// envHelperLogging), waits until its pod's containers have started, and
// SIGKILLs it, leaving its processes orphaned.
func startPreviousAgent(t *testing.T, dir string, uid types.UID, env []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envHelperStateDir+"="+dir, envHelperUID+"="+string(uid)), env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	// Whatever happens, leave no process behind.
	t.Cleanup(func() {
		for _, p := range processes(t, uid) {
			_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
		}
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		require.Equal(t, "ready\n", line, "the previous agent failed")
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the previous agent did not start its pod within 10s")
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
}

// diagnose describes what the state directory recorded for uid's
// containers and what /proc says of those processes.
func diagnose(dir string, uid types.UID) string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(dir, "pods", string(uid), "containers", "*.json"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "%s: %s\n", filepath.Base(f), data)
		var rec struct{ PID int }
		if json.Unmarshal(data, &rec) == nil && rec.PID > 0 {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", rec.PID))
			fmt.Fprintf(&b, "  /proc/%d/stat: %q %v\n", rec.PID, stat, err)
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", rec.PID))
			fmt.Fprintf(&b, "  /proc/%d/environ: %d bytes %v\n", rec.PID, len(env), err)
		}
	}
	return b.String()
}

// leaders returns the main processes of uid's containers, requiring n
// (unless n is negative).
func leaders(t *testing.T, uid types.UID, n int) []processruntime.Process {
	t.Helper()
	var out []processruntime.Process
	for _, p := range processes(t, uid) {
		if p.Leader {
			out = append(out, p)
		}
	}
	if n >= 0 {
		require.Len(t, out, n, "main processes of pod %s", uid)
	}
	return out
}

func TestOrphansOfACrashedAgentAreKilledByHousekeeping(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	uid := types.UID(fmt.Sprintf("orphan-%d", time.Now().UnixNano()))
	crashAgent(t, dir, uid)

	// The agent starts again on the same state directory. Config does not
	// know the pod: housekeeping lists it from the runtime and has the
	// workers kill it through SyncTerminatingRuntimePod.
	rt := openRuntime(t, processruntime.Options{StateDir: dir})
	require.Equal(t, []podworker.RuntimePod{{UID: uid, Namespace: "test", Name: "survivor"}}, rt.RuntimePods())
	require.True(t, status(t, rt, uid).Running(), "the orphans were adopted")

	agent, err := lifecycle.NewAgent[processruntime.PodStatus](rt, lifecycle.AgentOptions[processruntime.PodStatus]{
		Workers: podworker.Options[processruntime.PodStatus]{Status: rt},
		SyncLoop: lifecycle.SyncLoopOptions{
			RuntimePods: lifecycle.RuntimePodListerFunc(func(context.Context) ([]podworker.RuntimePod, error) {
				return rt.RuntimePods(), nil
			}),
			HousekeepingInterval: 100 * time.Millisecond,
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	eventually(t, 10*time.Second, "the orphans are gone from the process table", func() bool { return len(processes(t, uid)) == 0 })
	eventually(t, 5*time.Second, "the runtime forgot the pod", func() bool { return len(rt.RuntimePods()) == 0 })
	assert.NoDirExists(t, rt.PodDir(uid))
}

func TestProcessesOfADesiredPodAreAdoptedNotStartedTwice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	uid := types.UID(fmt.Sprintf("adopted-%d", time.Now().UnixNano()))
	before := crashAgent(t, dir, uid)
	earlier := processruntime.ReadV1Record(dir)

	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{StateDir: dir, OnEvent: ev.add})
	pod := restartPod(uid)
	for range 2 {
		terminal, err := syncPod(rt, pod)
		require.NoError(t, err)
		require.False(t, terminal)
	}
	assert.ElementsMatch(t, before, leaders(t, uid, 2), "SyncPod started nothing: the running processes were adopted")
	st := status(t, rt, uid)
	for _, c := range st.Containers {
		assert.Equal(t, processruntime.ContainerStateRunning, c.State, c.Name)
		assert.Zero(t, c.RestartCount, c.Name)
	}

	start := time.Now()
	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 1, nil))
	assert.Less(t, time.Since(start), 5*time.Second, "the adopted processes were stopped at the end of their 1 s grace period, not later")
	assert.Empty(t, processes(t, uid))
	st = status(t, rt, uid)
	for _, c := range st.Containers {
		require.NotNil(t, c.Exit, c.Name)
		if rt.Containment().Sandbox {
			// Its sandbox's init reaped it, and says how it ended.
			assert.Equal(t, processruntime.ReasonError, c.Exit.Reason, c.Name)
			assert.Contains(t, []int32{137, 143}, c.Exit.Code, c.Name)
		} else {
			assert.Equal(t, processruntime.ReasonStatusUnknown, c.Exit.Reason, "an adopted process's exit code cannot be known")
		}
	}
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
	require.NoError(t, rt.Close(), "the watchers of adopted processes have ended")
	// The previous agent ran without cgroup v2 (envHelperCgroups off), so
	// it accounted the pod's CPU in cgroup v1's cpuacct, a hierarchy this
	// runtime does not use where it has a v2 tree: its pod's cgroups there
	// are removed all the same.
	for controller, base := range earlier {
		assert.NoDirExists(t, filepath.Join(base, "pod-"+string(uid)), "the pod's %s cgroup, made by the previous agent", controller)
	}
}

func TestAPodWhoseProcessesDiedWhileTheAgentWasDownIsRecordedExited(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	uid := types.UID(fmt.Sprintf("dead-%d", time.Now().UnixNano()))
	orphans := crashAgent(t, dir, uid)
	for _, p := range orphans {
		require.NoError(t, syscall.Kill(-p.PGID, syscall.SIGKILL))
	}
	// Dead and reaped: in a sandbox its init reaps them and records how
	// they ended, a moment after they die (a zombie is no longer among
	// the pod's processes, but the init may not have seen its end yet).
	eventually(t, 5*time.Second, "the orphans died and were reaped", func() bool {
		for _, p := range orphans {
			if _, err := os.Stat("/proc/" + strconv.Itoa(p.PID)); err == nil {
				return false
			}
		}
		return len(containerProcesses(t, uid)) == 0
	})

	rt := openRuntime(t, processruntime.Options{StateDir: dir})
	st := status(t, rt, uid)
	require.Len(t, st.Containers, 2)
	assert.False(t, st.Running())
	for _, c := range st.Containers {
		assert.Equal(t, processruntime.ContainerStateExited, c.State, c.Name)
		assert.Equal(t, int32(137), c.Exit.Code)
	}
	// Under restartPolicy Always the desired pod is started again.
	_, err := syncPod(rt, restartPod(uid))
	require.NoError(t, err)
	eventually(t, 5*time.Second, "restarted", func() bool { return status(t, rt, uid).Running() })
	c, _ := status(t, rt, uid).Container("plain")
	assert.Equal(t, int32(1), c.RestartCount)
	terminate(t, rt, restartPod(uid), 1)
	assert.Empty(t, processes(t, uid))
}
