//go:build linux

package processruntime

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process the runtime starts where limits are cgroup v1's is born in its
// pod's cgroups, not moved there after it began: the cgroups it reports
// before anything could move it (cat's first read of /proc/self/cgroup,
// with no place call after the start) are the pod's, for every limited
// controller. The thread that started it has left the pod's cgroups by
// the time the start returns.
func TestAProcessIsBornInItsPodsV1Cgroups(t *testing.T) {
	stateDir := t.TempDir()
	l := openLimiter(stateDir, nil, 0, false)
	t.Cleanup(func() {
		if err := removeV1Cgroups(stateDir); err != nil {
			t.Errorf("removing the test's cgroups: %v", err)
		}
	})
	if len(l.v1) == 0 {
		t.Skip("no writable cgroup v1 hierarchy here (needs root on a machine whose pids, memory or cpu controller is cgroup v1's)")
	}
	const uid = "born"
	require.NoError(t, l.apply(uid, podLimits{memory: 256 << 20, pids: 100}))

	var out []byte
	placed, err := l.startBorn(uid, func() error {
		var err error
		out, err = exec.Command("cat", "/proc/self/cgroup").Output()
		return err
	})
	require.NoError(t, err)
	require.True(t, placed, "the starting thread joined the pod's cgroups")
	for c, base := range l.v1 {
		want := filepath.Join(base, "pod-"+uid)
		found := false
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), c) {
				found = true
				assert.True(t, strings.HasSuffix(want, parts[2]), "the %s cgroup the process was born in is %s, not the pod's %s", c, parts[2], want)
			}
		}
		assert.True(t, found, "the process reports a %s cgroup: %s", c, out)
	}

	// The starting thread left the pod's cgroups before startBorn
	// returned, not only when it ends (later, the kernel's): a cleanup
	// right after a short container would find it there, and fail.
	for c, base := range l.v1 {
		b, err := os.ReadFile(filepath.Join(base, "pod-"+uid, "tasks"))
		require.NoError(t, err)
		assert.Empty(t, strings.TrimSpace(string(b)), "the pod's %s cgroup holds no thread once the start returned", c)
	}
}
