package clustertest

import "syscall"

// childProcAttr puts a child of the cluster in a process group of its own
// (apart from a terminal's Ctrl-C, which this process handles) and has it
// die with this process (Pdeathsig; see startChild).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
