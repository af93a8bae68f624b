package cgroupfs

import (
	"strconv"
	"syscall"
)

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
