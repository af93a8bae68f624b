package processruntime_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// buildStages builds cmd/podkit-stages into dir, static as the install
// docs and clustertest build it (the netgo and osusergo tags), and returns
// its path, skipping the test where no go command can.
func buildStages(tb testing.TB, dir string) string {
	tb.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		tb.Skip("no go command to build cmd/podkit-stages with")
	}
	exe := filepath.Join(dir, "podkit-stages")
	if out, err := exec.Command(goCmd, "build", "-tags", "netgo,osusergo", "-o", exe, "./cmd/podkit-stages").CombinedOutput(); err != nil {
		tb.Fatalf("building cmd/podkit-stages: %v\n%s", err, out)
	}
	require.NoError(tb, os.Chmod(filepath.Dir(exe), 0o755))
	return exe
}

// With Options.StageExecutable, a pod's sandbox stages and log shim are
// that program, and the pod runs as it does without: its container's
// output reaches its log, in its own user namespace.
func TestStageExecutableRunsThePodsStages(t *testing.T) {
	exe := buildStages(t, t.TempDir())
	ev := newEvents()
	rt := sandboxed(t, processruntime.Options{OnEvent: ev.add, StageExecutable: exe})
	pod := shellPod(`echo through-the-stages; cat /proc/self/uid_map`)
	out := runToEnd(t, rt, ev, pod)
	assert.Contains(t, out, "through-the-stages")
	assert.NotContains(t, out, "         0          0 4294967295", "the pod has a user namespace of its own")

	// The sandbox's init of a pod still running is the stages' program.
	sleeper := newPod(v1.RestartPolicyNever, "c", "exec sleep 3600")
	_, err := syncPod(rt, sleeper)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, sleeper, 1) })
	var inits int
	for _, p := range processes(t, sleeper.UID) {
		if !p.Sandbox {
			continue
		}
		inits++
		target, err := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/exe")
		require.NoError(t, err)
		assert.Equal(t, exe, target, "the sandbox's init")
	}
	assert.Equal(t, 1, inits, "one init")
}

// A StageExecutable that is not an absolute path to an executable file is
// refused at Open.
func TestStageExecutableMustBeAnExecutableFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("not a program"), 0o644))
	for _, exe := range []string{"podkit-stages", plain, filepath.Join(dir, "missing")} {
		_, err := processruntime.Open(processruntime.Options{StateDir: t.TempDir(), StageExecutable: exe})
		assert.ErrorContains(t, err, "StageExecutable", exe)
	}
}
