package processruntime_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// The pods' cgroups stay when a runtime closes while they run (a later
// runtime adopts them). A harness that then kills the processes itself
// removes them with RemoveCgroups; while a process still runs, RemoveCgroups
// refuses, names the cgroup, and removes nothing that holds it.
func TestRemoveCgroupsAfterTheProcessesAreGone(t *testing.T) {
	t.Parallel()
	requireCgroups(t)
	dir := t.TempDir()
	rt, err := processruntime.Open(processruntime.Options{StateDir: dir, Cgroups: processruntime.CgroupsRequired})
	require.NoError(t, err)
	base := rt.Containment().Cgroup
	require.NotEmpty(t, base)
	pod := newPod(v1.RestartPolicyAlways, "main", "exec sleep 300")
	_, err = syncPod(rt, pod)
	require.NoError(t, err)
	eventually(t, 10*time.Second, "the container runs", func() bool { return len(processes(t, pod.UID)) > 0 })
	require.NoError(t, rt.Close())
	t.Cleanup(func() { processruntime.KillProcesses(processes(t, pod.UID)) })
	require.DirExists(t, base, "a running pod's cgroup stays when its runtime closes")

	err = processruntime.RemoveCgroups(dir)
	require.Error(t, err, "a cgroup that holds a process is not removed")
	assert.Contains(t, err.Error(), "still hold processes")
	assert.Contains(t, err.Error(), string(pod.UID))
	require.DirExists(t, base)

	processruntime.KillProcesses(processes(t, pod.UID))
	require.NoError(t, processruntime.RemoveCgroups(dir), "once killed, the processes' cgroups go")
	claims, _ := os.ReadDir(processruntime.DefaultIDRegistry)
	for _, c := range claims {
		b, _ := os.ReadFile(filepath.Join(processruntime.DefaultIDRegistry, c.Name()))
		assert.NotContains(t, string(b), dir+"\n", "the pod's range of host IDs is free again")
	}
	assert.NoDirExists(t, base, "and the runtime's own")
	require.NoError(t, processruntime.RemoveCgroups(dir), "a second call finds nothing to do")
}

// A state directory whose runtime made no cgroup has nothing to remove.
func TestRemoveCgroupsWithoutCgroups(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, processruntime.RemoveCgroups(dir), "no runtime ever ran here")
	rt, err := processruntime.Open(processruntime.Options{StateDir: dir, Cgroups: processruntime.CgroupsOff})
	require.NoError(t, err)
	require.NoError(t, rt.Close())
	require.NoError(t, processruntime.RemoveCgroups(dir), "a runtime without cgroups")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte("/sys/fs/cgroup/podkit-gone-long-ago\n"), 0o600))
	require.NoError(t, processruntime.RemoveCgroups(dir), "a recorded cgroup that no longer exists")
}
