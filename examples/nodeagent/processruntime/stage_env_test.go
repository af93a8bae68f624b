package processruntime_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// The sandbox's init and the log shims run on one P (GOMAXPROCS=1, what a
// stage's start costs least with), and the container's command never
// gets that setting: its environment is the container's.
func TestStagesRunOnOnePButContainersDoNot(t *testing.T) {
	rt := sandboxed(t, processruntime.Options{})
	pod := newPod(v1.RestartPolicyNever, "c", `echo "gomaxprocs=[$GOMAXPROCS]"; exec sleep 3600`)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	waitLog(t, rt, pod.UID, "c", "gomaxprocs=")
	assert.Contains(t, readLogs(t, rt, pod.UID, "c", processruntime.LogOptions{}), "gomaxprocs=[]")

	var inits int
	for _, p := range processes(t, pod.UID) {
		if p.Sandbox {
			inits++
			assert.Contains(t, environ(t, p.PID), "GOMAXPROCS=1", "the init's environment")
		}
	}
	assert.Equal(t, 1, inits, "the pod's init among its processes")
	shims := logShims(t, rt.PodDir(pod.UID))
	require.NotEmpty(t, shims, "the container's log shim")
	for _, pid := range shims {
		assert.Contains(t, environ(t, pid), "GOMAXPROCS=1", "the log shim's environment")
	}
}

// environ returns process pid's environment.
func environ(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	require.NoError(t, err)
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// A sandbox's init is in the pod's cgroups (born there: the spawner's
// thread that starts it joins the pod's cgroup v1 hierarchies first, and
// the v2 tree's leaf takes it at its clone), and the pod's v1 cgroups hold
// the pod's processes only, not that thread of the spawner's.
func TestASandboxsInitIsInThePodsCgroups(t *testing.T) {
	rt := sandboxed(t, processruntime.Options{})
	pod := newPod(v1.RestartPolicyNever, "c", "exec sleep 3600")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	var init int
	for _, p := range processes(t, pod.UID) {
		if p.Sandbox {
			init = p.PID
		}
	}
	require.NotZero(t, init, "the pod's init")
	b, err := os.ReadFile("/proc/" + strconv.Itoa(init) + "/cgroup")
	require.NoError(t, err)
	lim := rt.Containment().Limits
	// The controllers whose cgroup v1 hierarchy limits pods here.
	v1 := map[string]bool{}
	for ctrl, how := range map[string]string{"pids": lim.Pids, "memory": lim.Memory, "cpu": lim.CPU} {
		if how == "cgroup v1" {
			v1[ctrl] = true
		}
	}
	pod1 := "/pod-" + string(pod.UID)
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrl := strings.Split(parts[1], ",")[0]
		switch {
		case v1[ctrl]:
			checked++
			if !assert.True(t, strings.HasSuffix(parts[2], pod1), "the init's %s cgroup %s is not the pod's", ctrl, parts[2]) {
				continue
			}
			tasks, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, parts[2], "tasks"))
			require.NoError(t, err)
			for _, tid := range strings.Fields(string(tasks)) {
				env, err := os.ReadFile("/proc/" + tid + "/environ")
				if err != nil || len(env) == 0 {
					continue // ended meanwhile, or in its execve (no environment yet)
				}
				assert.Contains(t, string(env), processruntime.EnvPodUID+"="+string(pod.UID), "thread %s in the pod's %s cgroup is not the pod's", tid, ctrl)
			}
		case parts[1] == "" && rt.Containment().Cgroup != "":
			checked++
			assert.Contains(t, parts[2], pod1+"/sandbox_.", "the init's cgroup v2 leaf")
		}
	}
	if checked == 0 {
		t.Skipf("the pods get no cgroups here (limits %+v): %s", lim, b)
	}
}
