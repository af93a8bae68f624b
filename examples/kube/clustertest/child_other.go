//go:build !linux

package clustertest

import "syscall"

// childProcAttr puts a child of the cluster in a process group of its own
// (apart from a terminal's Ctrl-C, which this process handles). Only Linux
// has it die with this process.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
