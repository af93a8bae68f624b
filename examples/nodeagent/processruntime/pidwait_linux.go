//go:build linux

package processruntime

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit returns once process pid, a child of this process that
// nobody has reaped yet (so its PID is not reused meanwhile), has ended,
// without reaping it. It waits in Go's network poller, for the process's
// pidfd to become readable, so the waiting goroutine holds no OS thread:
// a wait blocked in the kernel (wait4, waitid) holds one each, and an
// agent waits on two processes a pod (the sandbox's init, a log shim per
// container) for the pod's life. The wait that follows it (Wait4,
// exec.Cmd.Wait) finds the process ended and returns at once.
//
// Called from the goroutine that then waits; it blocks until the process
// ends. Where the kernel gives no pollable pidfd (Linux before 5.3, or an
// error opening one) it returns at once, and the caller's wait blocks in
// the kernel as before.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	// A non-blocking descriptor: os.NewFile registers it with the poller.
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		// A pidfd is readable once its process has ended.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err != nil || n > 0
	})
}
