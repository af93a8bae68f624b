//go:build linux

package podconfig

import (
	"errors"
	"os"
	"syscall"
)

// pseudoFilesystems are the filesystems whose files are not manifests:
// their contents are made up when read (a size of 0, reads that block or
// consume what they return, like /proc/kmsg).
var pseudoFilesystems = map[int64]string{
	0x9fa0:     "/proc",   // PROC_SUPER_MAGIC
	0x62656572: "sysfs",   // SYSFS_MAGIC
	0x64626720: "debugfs", // DEBUGFS_MAGIC
	0x74726163: "tracefs", // TRACEFS_MAGIC
	0x73636673: "securityfs",
	0x27e0eb:   "cgroup",
	0x63677270: "cgroup2",
	0x62656570: "configfs",
	0x6e736673: "nsfs",
}

// checkFilesystem refuses a file on a pseudo-filesystem.
func checkFilesystem(f *os.File) error {
	// Through SyscallConn, not Fd, which would make the file blocking.
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var st syscall.Statfs_t
	var statErr error
	if err := rc.Control(func(fd uintptr) { statErr = syscall.Fstatfs(int(fd), &st) }); err != nil {
		return err
	}
	if statErr != nil {
		return statErr
	}
	if name, ok := pseudoFilesystems[int64(st.Type)]; ok {
		return errors.New("it is a file of " + name + ", not a manifest")
	}
	return nil
}
