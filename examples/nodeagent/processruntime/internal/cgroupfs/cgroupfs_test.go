//go:build linux

package cgroupfs_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/cgroupfs"
)

// Write writes an existing file and never creates one: a cgroup's
// interface files exist or the cgroup does not.
func TestWriteNeverCreates(t *testing.T) {
	dir := t.TempDir()
	assert.ErrorIs(t, cgroupfs.Write(filepath.Join(dir, "cgroup.procs"), "1"), os.ErrNotExist)
	path := filepath.Join(dir, "cpu.max")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	require.NoError(t, cgroupfs.Write(path, "max 100000"))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "max 100000", string(b))
}

// A thread that cannot join one of the cgroups goes back to leave's and
// says it did not join; with nothing to join it joins nothing. (Plain
// files stand for the "tasks" files: what matters is what the thread
// writes where.)
func TestJoinThreadGoesBackWhereItCannotJoin(t *testing.T) {
	assert.False(t, cgroupfs.JoinThread(nil, nil))
	dir := t.TempDir()
	joined, leave := filepath.Join(dir, "pod-tasks"), filepath.Join(dir, "runtime-tasks")
	for _, f := range []string{joined, leave} {
		require.NoError(t, os.WriteFile(f, nil, 0o600))
	}
	missing := filepath.Join(dir, "gone", "tasks")
	done := make(chan struct{})
	var ok bool
	var tid int
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid = syscall.Gettid()
		ok = cgroupfs.JoinThread([]string{joined, missing}, []string{leave})
	}()
	<-done
	assert.False(t, ok)
	for f, want := range map[string]string{joined: strconv.Itoa(tid), leave: strconv.Itoa(tid)} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Equal(t, want, string(b), f)
	}
}

// The errors of a kernel that cannot start a process in a cgroup, and no
// others, say so.
func TestCloneIntoUnsupported(t *testing.T) {
	for _, err := range []error{syscall.ENOSYS, syscall.EINVAL, syscall.EOPNOTSUPP, syscall.E2BIG} {
		assert.True(t, cgroupfs.CloneIntoUnsupported(&os.SyscallError{Syscall: "clone3", Err: err}), err.Error())
	}
	assert.False(t, cgroupfs.CloneIntoUnsupported(syscall.EPERM))
	assert.False(t, cgroupfs.CloneIntoUnsupported(nil))
}
