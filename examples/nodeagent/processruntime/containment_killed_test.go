//go:build linux

package processruntime

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTree returns a cgroup tree of its own, with a container cgroup of
// pod "p" holding a sleep process not yet killed, and removes them when
// the test ends. It skips the test where no writable cgroup v2 exists.
func testTree(t *testing.T) (*cgroupTree, string, *exec.Cmd) {
	t.Helper()
	tree, err := openCgroupTree(t.TempDir(), "")
	if err != nil {
		t.Skipf("no writable cgroup v2 hierarchy here: %v", err)
	}
	dir, err := tree.newContainerCgroup("p", "main")
	require.NoError(t, err)
	cmd := exec.Command("sleep", "300")
	require.NoError(t, tree.startIn(cmd, dir))
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		tree.awaitKilled(killedWait)
		_ = tree.remove(tree.base)
	})
	return tree, dir, cmd
}

// Close waits for a cgroup the runtime killed to empty, then removes it
// (and the pod's cgroup and the base with it), instead of leaving an
// empty cgroup on the host because the killed process had not ended yet.
func TestCloseRemovesACgroupOnceItsKilledProcessesEnd(t *testing.T) {
	tree, dir, cmd := testTree(t)
	// The cgroup is killed, but its process has not ended yet: it ends
	// only once removeEmpty waits for it.
	tree.setKilled(dir, true)
	waited := false
	tree.awaiting = func(d string) {
		assert.Equal(t, dir, d)
		waited = true
		require.NoError(t, cmd.Process.Kill())
	}
	tree.removeEmpty()
	assert.True(t, waited, "removeEmpty waited for the killed cgroup")
	assert.NoDirExists(t, dir)
	assert.NoDirExists(t, tree.base, "the base is removed once nothing is left in it")
	assert.Empty(t, tree.killed, "nothing removed is remembered")
}

// The wait is bounded: a killed cgroup that does not empty in time is
// left, with its process, for a later run.
func TestCloseLeavesACgroupThatDoesNotEmptyInTime(t *testing.T) {
	tree, dir, cmd := testTree(t)
	tree.setKilled(dir, true)
	tree.awaitKilled(0)
	assert.DirExists(t, dir)
	populated, err := tree.populated(dir)
	require.NoError(t, err)
	assert.True(t, populated)
	assert.NoError(t, syscall.Kill(cmd.Process.Pid, 0), "the process still runs")
	assert.True(t, tree.killed[dir], "and the cgroup is still known as killed")
}
