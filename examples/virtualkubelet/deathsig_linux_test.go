package virtualkubelet_test

import "syscall"

// dieWithTest has a child killed (SIGKILL) when the thread that forked it
// ends, and with it the test process.
func dieWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
