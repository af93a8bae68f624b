package processruntime_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/lifecycle/volume"
)

// ReleaseVolumes unmounts what a volume manager left mounted under a state
// directory's VolumeRoot, and nothing elsewhere.
func TestReleaseVolumesUnmountsTheVolumeRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	state := t.TempDir()
	vol := filepath.Join(state, "volumes", "uid-1", "secret")
	other := filepath.Join(state, "elsewhere")
	for _, d := range []string{vol, other} {
		require.NoError(t, os.MkdirAll(d, 0o700))
		require.NoError(t, syscall.Mount("tmpfs", d, "tmpfs", 0, "size=1m"))
	}
	t.Cleanup(func() { _ = syscall.Unmount(other, syscall.MNT_DETACH); _ = syscall.Unmount(vol, syscall.MNT_DETACH) })
	require.NoError(t, processruntime.ReleaseVolumes(state))
	isMount := func(dir string) bool {
		ok, err := volume.LinuxTmpfs{}.IsMountPoint(dir)
		require.NoError(t, err)
		return ok
	}
	assert.False(t, isMount(vol), "the volume's tmpfs is gone")
	assert.True(t, isMount(other), "a mount outside the volume root stays")
	require.NoError(t, processruntime.ReleaseVolumes(state), "nothing left: no error")
}
