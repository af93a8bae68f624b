//go:build linux

package mountinfo

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	table := `22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw
35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
90 35 0:30 /a\040b /mnt/with\040space rw - cgroup2 cgroup2 rw
broken line
91 35 0:31 / /x rw - 
`
	got, err := parse(strings.NewReader(table))
	require.NoError(t, err)
	assert.Equal(t, []Mount{
		{ID: 22, Parent: 1, Root: "/", MountPoint: "/proc", FSType: "proc", Super: "rw"},
		{ID: 35, Parent: 25, Root: "/", MountPoint: "/sys/fs/cgroup/unified", FSType: "cgroup2", Super: "rw,nsdelegate"},
		{ID: 90, Parent: 35, Root: "/a b", MountPoint: "/mnt/with space", FSType: "cgroup2", Super: "rw"},
	}, got)
}

func TestReadFindsTheRoot(t *testing.T) {
	mounts, err := Read()
	if err != nil {
		t.Skipf("no mount table here: %v", err)
	}
	var mountPoints []string
	for _, m := range mounts {
		mountPoints = append(mountPoints, m.MountPoint)
	}
	assert.Contains(t, mountPoints, "/")
}

// ReadThread shows the mount namespace of the calling thread: a mount
// made on a thread with a namespace of its own shows there, and not in
// Read's table (the process's main thread's).
func TestReadThreadShowsTheThreadsNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a mount namespace of its own needs root")
	}
	dir := t.TempDir()
	type tables struct {
		thread, process []Mount
		err             error
	}
	var got tables
	onOwnThread(func() {
		if got.err = unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); got.err != nil {
			return
		}
		if got.err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); got.err != nil {
			return
		}
		if got.err = unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4096"); got.err != nil {
			return
		}
		if got.thread, got.err = ReadThread(); got.err != nil {
			return
		}
		got.process, got.err = Read()
	})
	require.NoError(t, got.err)
	has := func(ms []Mount) bool {
		for _, m := range ms {
			if m.MountPoint == dir {
				return true
			}
		}
		return false
	}
	assert.True(t, has(got.thread), "the thread's table lacks its own mount")
	assert.False(t, has(got.process), "the process's table shows the thread's mount")
}

// onOwnThread runs f on a locked thread that ends with f and is not the
// main thread (whose table Read shows, and which the Go runtime never
// ends), and waits for it.
func onOwnThread(f func()) {
	ran := make(chan struct{})
	var run func()
	run = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Hold the main thread while another one runs f.
			go run()
			<-ran
			runtime.UnlockOSThread()
			return
		}
		defer close(ran) // never unlocked: the thread ends here
		f()
	}
	go run()
	<-ran
}
