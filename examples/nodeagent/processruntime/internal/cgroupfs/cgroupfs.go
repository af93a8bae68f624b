//go:build linux

// Package cgroupfs is what the process runtime and its sandbox spawner
// both do with cgroups: write an interface file, move the calling thread
// between cgroup v1 hierarchies' cgroups so that a process it forks is
// born there, and tell an error of a kernel that cannot start a process
// in a cgroup (clone3's CLONE_INTO_CGROUP).
package cgroupfs

import (
	"errors"
	"os"
	"strconv"
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

// JoinThread puts the calling thread, which must be locked to its
// goroutine and discarded afterwards, in the cgroup of each "tasks" file of
// join (one per cgroup v1 hierarchy), so that a process it forks is born
// there. Where it cannot join one it goes back to leave (LeaveThread) and
// reports false; with no join, it reports false too.
func JoinThread(join, leave []string) bool {
	if len(join) == 0 {
		return false
	}
	tid := strconv.Itoa(syscall.Gettid())
	for _, tasks := range join {
		if Write(tasks, tid) != nil {
			LeaveThread(leave)
			return false
		}
	}
	return true
}

// LeaveThread moves the calling thread to the cgroups of leave's "tasks"
// files (the runtime's own, which outlive every pod's). A thread that
// joined a pod's cgroups leaves them before its caller goes on: its end
// comes later, on the kernel's time, and until then the pod's cgroups
// would hold it and could not be removed (EBUSY).
func LeaveThread(leave []string) {
	tid := strconv.Itoa(syscall.Gettid())
	for _, tasks := range leave {
		_ = Write(tasks, tid)
	}
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
