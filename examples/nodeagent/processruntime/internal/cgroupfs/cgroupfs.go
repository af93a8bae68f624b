// Package cgroupfs is what the process runtime and its sandbox spawner
// both do with cgroups: write an interface file, move the calling thread
// between cgroup v1 hierarchies' cgroups so that a process it forks is
// born there, and tell an error of a kernel that cannot start a process
// in a cgroup (clone3's CLONE_INTO_CGROUP).
package cgroupfs

import (
	"errors"
	"os"
	"syscall"
)

// Write writes one value to a cgroup interface file, which must exist
// (it is never created).
func Write(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// CloneIntoUnsupported reports whether err, a process start's, says the
// kernel cannot start a process in a cgroup (no clone3, or no
// CLONE_INTO_CGROUP).
func CloneIntoUnsupported(err error) bool {
	for _, e := range []error{syscall.ENOSYS, syscall.EINVAL, syscall.EOPNOTSUPP, syscall.E2BIG} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
