//go:build linux

package sandbox

import "golang.org/x/sys/unix"

const (
	seccompArch = unix.AUDIT_ARCH_X86_64
	// seccompX32: system call numbers from 0x40000000 are the x32 ABI's.
	seccompX32 = true
)

var seccompArchRules = []seccompRule{
	{unix.SYS_CREATE_MODULE, 0}, {unix.SYS_GET_KERNEL_SYMS, 0}, {unix.SYS_QUERY_MODULE, 0},
	{unix.SYS_USELIB, 0}, {unix.SYS_USTAT, 0}, {unix.SYS_SYSFS, 0}, {unix.SYS__SYSCTL, 0},
	{unix.SYS_IOPL, mustCapabilities("SYS_RAWIO")}, {unix.SYS_IOPERM, mustCapabilities("SYS_RAWIO")},
}
