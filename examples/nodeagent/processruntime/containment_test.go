package processruntime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	"github.com/podkit/podkit/podworker"
)

// escapeScript starts a child that leaves the container's process group
// and session (setsid) and writes its PID to escaped.pid in the pod's
// scratch directory; the container's main process then runs on.
const escapeScript = `setsid sleep 300 & echo $! > escaped.pid; exec sleep 300`

// escaperPod is a pod whose container starts a child with setsid.
func escaperPod(uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "escaper", Namespace: "test", UID: uid},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "main", Command: []string{"sh", "-c", escapeScript}}},
		},
	}
}

// eachContainment runs test once with a cgroup per pod (skipped, saying
// why, where no writable cgroup v2 hierarchy exists) and once with process
// groups and the environment scan only. These tests are of the
// containment of pods run without a sandbox (the fallback where a
// machine has none): a sandbox's PID namespace holds every process of its
// pod anyway (sandbox_containment_test.go), and the PIDs its processes
// write are its namespace's, not the host's.
func eachContainment(t *testing.T, test func(t *testing.T, mode processruntime.CgroupMode)) {
	t.Run("cgroup", func(t *testing.T) {
		t.Parallel()
		requireCgroups(t)
		test(t, processruntime.CgroupsRequired)
	})
	t.Run("environment", func(t *testing.T) {
		t.Parallel()
		test(t, processruntime.CgroupsOff)
	})
}

// requireCgroups skips the test where the runtime cannot have cgroups.
func requireCgroups(t *testing.T) {
	t.Helper()
	rt, err := processruntime.Open(processruntime.Options{StateDir: t.TempDir(), Cgroups: processruntime.CgroupsRequired})
	if err != nil {
		t.Skipf("no writable cgroup v2 hierarchy here, so cgroup containment cannot be tested: %v", err)
	}
	require.NoError(t, rt.Close())
}

// escapedPID waits for the PID a container wrote to file in the pod's
// scratch directory, and returns it with the process's start time.
func escapedPID(t *testing.T, rt *processruntime.Runtime, uid types.UID, file string) (int, string) {
	t.Helper()
	return escapedPIDAt(t, filepath.Join(rt.PodDir(uid), "scratch", file))
}

// escapedPIDAt waits for the PID written to path, and returns it with the
// process's start time. The process is killed when the test ends.
func escapedPIDAt(t *testing.T, path string) (int, string) {
	t.Helper()
	var pid int
	var start string
	eventually(t, 10*time.Second, "the escaped child's PID", func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return false
		}
		start = startTime(pid)
		return start != ""
	})
	t.Cleanup(func() {
		if alive(pid, start) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			eventually(t, 10*time.Second, "the escaped child killed at cleanup is gone", func() bool { return !alive(pid, start) })
		}
	})
	return pid, start
}

// removeTestCgroup removes, once rt is closed, the cgroup its pods were
// in, so that tests leave no cgroup on the host: it kills what still runs
// there (a test's leftovers), waits until the cgroup is empty and removes
// it, the cgroups below it first (rmdir only: a cgroup is never removed
// with what it holds).
func removeTestCgroup(t *testing.T, rt *processruntime.Runtime) {
	t.Helper()
	defer removeTestV1Cgroups(t, rt)
	base := rt.Containment().Cgroup
	if base == "" {
		return
	}
	if _, err := os.Stat(base); os.IsNotExist(err) {
		return
	}
	if err := os.WriteFile(filepath.Join(base, "cgroup.kill"), []byte("1"), 0); err != nil && !os.IsNotExist(err) {
		t.Errorf("killing what is left in the test's cgroup %s: %v", base, err)
	}
	eventually(t, 10*time.Second, "the test's cgroup "+base+" is empty", func() bool {
		b, err := os.ReadFile(filepath.Join(base, "cgroup.events"))
		return err != nil || !strings.Contains(string(b), "populated 1")
	})
	var dirs []string
	_ = filepath.WalkDir(base, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			t.Errorf("removing the test's cgroup %s: %v", dirs[i], err)
		}
	}
}

// removeTestV1Cgroups removes the cgroup v1 directories that limited the
// pods of rt (closed): the cgroup v2 kill above, or the pods' own
// termination, has ended their processes.
func removeTestV1Cgroups(t *testing.T, rt *processruntime.Runtime) {
	t.Helper()
	stateDir := filepath.Dir(filepath.Dir(rt.PodDir("x")))
	if err := processruntime.RemoveCgroups(stateDir); err != nil {
		t.Errorf("removing the test's cgroups: %v", err)
	}
}

// killOnCleanup kills the pod at once when the test ends, so a test that
// fails halfway leaves no process behind (Close leaves them running).
func killOnCleanup(t *testing.T, rt *processruntime.Runtime, pod *v1.Pod) {
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = rt.SyncTerminatingPod(ctx, pod, processruntime.PodStatus{}, 1, nil)
	})
}

// startTime returns the start time field of /proc/PID/stat, "" when no
// such live process exists.
func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	end := strings.LastIndexByte(string(b), ')')
	fields := strings.Fields(string(b[end+1:]))
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return ""
	}
	return fields[19]
}

// alive reports whether the process that started at start still runs.
func alive(pid int, start string) bool { return start != "" && startTime(pid) == start }

func TestAProcessThatLeftItsSessionStopsWithItsPod(t *testing.T) {
	t.Parallel()
	eachContainment(t, func(t *testing.T, mode processruntime.CgroupMode) {
		rt := openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff, Cgroups: mode})
		pod := escaperPod(types.UID(fmt.Sprintf("escaper-%d", time.Now().UnixNano())))
		_, err := syncPod(rt, pod)
		require.NoError(t, err)
		killOnCleanup(t, rt, pod)
		pid, start := escapedPID(t, rt, pod.UID, "escaped.pid")
		// setsid(1) leaves the group just after it starts.
		eventually(t, 5*time.Second, "the child left the container's process group", func() bool {
			for _, p := range processes(t, pod.UID) {
				if p.PID == pid {
					return p.Leader
				}
			}
			return false
		})

		require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 1, nil))
		assert.False(t, alive(pid, start), "the child that left its container's session outlived its pod")
		assert.Empty(t, processes(t, pod.UID))
		require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
		if c := rt.Containment(); c.Cgroup != "" {
			assert.NoDirExists(t, filepath.Join(c.Cgroup, "pod-"+string(pod.UID)), "the pod's cgroup is removed with it")
		}
	})
}

// Without cgroups, the pod's sweep is what stops a process that left its
// container's session and claims another container's name: killing what
// the exited main process left behind looks for its own container's name
// only, and the process left the group. The sweep kills every process
// carrying the pod's UID. (The process writes elsewhere than the
// container's log, which would otherwise keep the container's exit waiting
// for its log shim.)
func TestThePodSweepKillsAProcessOfNoKnownContainer(t *testing.T) {
	t.Parallel()
	rt := openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff, Cgroups: processruntime.CgroupsOff})
	pod := newPod(v1.RestartPolicyAlways, "main", processruntime.EnvContainerName+`=other setsid sleep 300 >/dev/null 2>&1 & echo $! > escaped.pid; exec sleep 300`)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	killOnCleanup(t, rt, pod)
	pid, start := escapedPID(t, rt, pod.UID, "escaped.pid")
	eventually(t, 5*time.Second, "the child left the container's process group, as container other", func() bool {
		for _, p := range processes(t, pod.UID) {
			if p.PID == pid {
				return p.Leader && p.Container == "other"
			}
		}
		return false
	})

	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 1, nil))
	assert.False(t, alive(pid, start), "the process of no known container outlived its pod")
	assert.Empty(t, processes(t, pod.UID))
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
}

// Only a cgroup holds a process that both left its session and cleared
// its environment: the environment scan cannot know it (see the package
// doc).
func TestACgroupHoldsAProcessThatClearedItsEnvironment(t *testing.T) {
	t.Parallel()
	requireCgroups(t)
	rt := openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff, Cgroups: processruntime.CgroupsRequired})
	pod := newPod(v1.RestartPolicyAlways, "main", `env -i setsid sleep 300 & echo $! > hidden.pid; exec sleep 300`)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	killOnCleanup(t, rt, pod)
	pid, start := escapedPID(t, rt, pod.UID, "hidden.pid")

	require.NoError(t, rt.SyncTerminatingPod(context.Background(), pod, processruntime.PodStatus{}, 1, nil))
	assert.False(t, alive(pid, start), "a process with a cleared environment escaped the pod's cgroup")
	require.NoError(t, rt.SyncTerminatedPod(context.Background(), pod, processruntime.PodStatus{}))
}

// With a cgroup per container, what a container's main process leaves
// behind dies with it even outside its process group, as in a container
// runtime.
func TestACgroupKillsWhatAnExitedContainerLeftOutsideItsGroup(t *testing.T) {
	t.Parallel()
	requireCgroups(t)
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff, Cgroups: processruntime.CgroupsRequired, OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "parent", `setsid sleep 300 & echo $! > escaped.pid; sleep 0.2`)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	killOnCleanup(t, rt, pod)
	pid, start := escapedPID(t, rt, pod.UID, "escaped.pid")
	ev.wait(t, "exit", exitedEvent(pod.UID, "parent", 1))
	eventually(t, 5*time.Second, "the child that left its session is gone", func() bool { return !alive(pid, start) })
	terminate(t, rt, pod, 1)
}

// A restarted agent kills what a container that died while it was down
// left behind, even outside the container's process group.
func TestARestartedAgentKillsWhatADeadContainerLeftBehind(t *testing.T) {
	t.Parallel()
	eachContainment(t, func(t *testing.T, mode processruntime.CgroupMode) {
		dir := t.TempDir()
		uid := types.UID(fmt.Sprintf("escaper-%d", time.Now().UnixNano()))
		startPreviousAgent(t, dir, uid, []string{envHelperPod + "=escaper", envHelperSandbox + "=off", envHelperCgroups + "=" + mode.String()})
		pid, start := escapedPIDAt(t, filepath.Join(dir, "pods", string(uid), "scratch", "escaped.pid"))
		// setsid(1) leaves the group just after it starts.
		var main []processruntime.Process
		eventually(t, 5*time.Second, "the child to lead its own group", func() bool {
			main = nil
			for _, p := range leaders(t, uid, -1) {
				if p.PID != pid {
					main = append(main, p)
				}
			}
			return len(main) == 1 && len(leaders(t, uid, -1)) == 2
		})
		// The container's main process dies while no agent runs.
		mainStart := startTime(main[0].PID)
		require.NoError(t, syscall.Kill(main[0].PID, syscall.SIGKILL))
		eventually(t, 5*time.Second, "the main process is gone", func() bool { return !alive(main[0].PID, mainStart) })
		require.True(t, alive(pid, start), "the escaped child outlived the main process")

		rt := openRuntime(t, processruntime.Options{StateDir: dir, Sandbox: processruntime.SandboxOff, Cgroups: mode})
		eventually(t, 5*time.Second, "the escaped child is killed", func() bool { return len(processes(t, uid)) == 0 })
		c, _ := status(t, rt, uid).Container("main")
		assert.Equal(t, processruntime.ContainerStateExited, c.State)
	})
}

// A pod known only from the state directory is killed whole: with a
// cgroup, even a process that left its session and cleared its
// environment.
func TestARuntimePodIsKilledWhole(t *testing.T) {
	t.Parallel()
	requireCgroups(t)
	dir := t.TempDir()
	uid := types.UID(fmt.Sprintf("runtime-only-%d", time.Now().UnixNano()))
	startPreviousAgent(t, dir, uid, []string{envHelperPod + "=escaper", envHelperSandbox + "=off", envHelperCgroups + "=required"})
	rt := openRuntime(t, processruntime.Options{StateDir: dir, Sandbox: processruntime.SandboxOff, Cgroups: processruntime.CgroupsRequired})
	pid, start := escapedPID(t, rt, uid, "escaped.pid")
	require.True(t, status(t, rt, uid).Running(), "the orphans were adopted")

	require.NoError(t, rt.SyncTerminatingRuntimePod(context.Background(), podworker.RuntimePod{UID: uid, Namespace: "test", Name: "escaper"}))
	assert.False(t, alive(pid, start))
	assert.Empty(t, processes(t, uid))
	assert.NoDirExists(t, filepath.Join(rt.Containment().Cgroup, "pod-"+string(uid)))
}

func TestContainment(t *testing.T) {
	t.Parallel()
	off := openRuntime(t, processruntime.Options{Sandbox: processruntime.SandboxOff, Cgroups: processruntime.CgroupsOff, PodPidsLimit: -1})
	c := off.Containment()
	assert.Equal(t, "cgroups are turned off", c.Fallback)
	assert.Empty(t, c.Cgroup)
	assert.False(t, c.Sandbox)
	assert.Equal(t, "sandboxes are turned off", c.SandboxFallback)
	assert.True(t, strings.HasPrefix(c.String(), "process groups and the environment scan (cgroups are turned off); no sandbox: pods run in the host's namespaces, as the agent's user (sandboxes are turned off)"), c.String())
	assert.Equal(t, processruntime.Limits{Pids: "RLIMIT_NPROC"}.Missing(), []string{"memory", "cpu"})

	_, err := processruntime.Open(processruntime.Options{StateDir: t.TempDir(), CgroupParent: t.TempDir()})
	require.Error(t, err, "a cgroup parent that is no cgroup is an error")
	assert.Contains(t, err.Error(), "is not in a cgroup v2 hierarchy")
	_, err = processruntime.Open(processruntime.Options{StateDir: t.TempDir(), Cgroups: processruntime.CgroupMode(9)})
	assert.ErrorContains(t, err, "unknown Options.Cgroups CgroupMode(9)")
}
