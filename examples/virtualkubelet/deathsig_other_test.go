//go:build !linux

package virtualkubelet_test

import "syscall"

// dieWithTest sets nothing: only Linux kills a child with its parent.
func dieWithTest() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
