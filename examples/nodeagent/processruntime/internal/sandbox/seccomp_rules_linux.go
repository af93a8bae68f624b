//go:build linux && (amd64 || arm64)

package sandbox

import "golang.org/x/sys/unix"

// seccompCommonRules are the RuntimeDefault refusals (see
// seccomp_linux.go) whose system calls exist on every architecture the
// filter is written for; seccompArchRules adds the others.
var seccompCommonRules = []seccompRule{
	{unix.SYS_KEXEC_LOAD, 0}, {unix.SYS_KEXEC_FILE_LOAD, 0},
	{unix.SYS_ADD_KEY, 0}, {unix.SYS_KEYCTL, 0}, {unix.SYS_REQUEST_KEY, 0},
	{unix.SYS_SWAPON, 0}, {unix.SYS_SWAPOFF, 0}, {unix.SYS_NFSSERVCTL, 0},
	{unix.SYS_USERFAULTFD, 0},
	{unix.SYS_IO_URING_SETUP, 0}, {unix.SYS_IO_URING_ENTER, 0}, {unix.SYS_IO_URING_REGISTER, 0},

	{unix.SYS_UNSHARE, capSysAdmin}, {unix.SYS_SETNS, capSysAdmin}, {unix.SYS_MOUNT, capSysAdmin},
	{unix.SYS_UMOUNT2, capSysAdmin}, {unix.SYS_PIVOT_ROOT, capSysAdmin},
	{unix.SYS_FSOPEN, capSysAdmin}, {unix.SYS_FSCONFIG, capSysAdmin}, {unix.SYS_FSMOUNT, capSysAdmin},
	{unix.SYS_FSPICK, capSysAdmin}, {unix.SYS_MOVE_MOUNT, capSysAdmin}, {unix.SYS_OPEN_TREE, capSysAdmin},
	{unix.SYS_MOUNT_SETATTR, capSysAdmin},
	{unix.SYS_NAME_TO_HANDLE_AT, capSysAdmin}, {unix.SYS_OPEN_BY_HANDLE_AT, capSysAdmin},
	{unix.SYS_QUOTACTL, capSysAdmin}, {unix.SYS_QUOTACTL_FD, capSysAdmin},
	{unix.SYS_LOOKUP_DCOOKIE, capSysAdmin}, {unix.SYS_FANOTIFY_INIT, capSysAdmin},
	{unix.SYS_SETHOSTNAME, capSysAdmin}, {unix.SYS_SETDOMAINNAME, capSysAdmin},

	{unix.SYS_BPF, capSysAdmin | mustCapabilities("BPF")},
	{unix.SYS_PERF_EVENT_OPEN, capSysAdmin | mustCapabilities("PERFMON")},
	{unix.SYS_SYSLOG, capSysAdmin | mustCapabilities("SYSLOG")},
	{unix.SYS_REBOOT, mustCapabilities("SYS_BOOT")},
	{unix.SYS_INIT_MODULE, mustCapabilities("SYS_MODULE")}, {unix.SYS_FINIT_MODULE, mustCapabilities("SYS_MODULE")},
	{unix.SYS_DELETE_MODULE, mustCapabilities("SYS_MODULE")},
	{unix.SYS_ACCT, mustCapabilities("SYS_PACCT")},
	{unix.SYS_KCMP, mustCapabilities("SYS_PTRACE")}, {unix.SYS_PIDFD_GETFD, mustCapabilities("SYS_PTRACE")},
	{unix.SYS_PROCESS_MADVISE, mustCapabilities("SYS_PTRACE")},
	{unix.SYS_SETTIMEOFDAY, mustCapabilities("SYS_TIME")}, {unix.SYS_CLOCK_SETTIME, mustCapabilities("SYS_TIME")},
	{unix.SYS_CLOCK_ADJTIME, mustCapabilities("SYS_TIME")},
	{unix.SYS_VHANGUP, mustCapabilities("SYS_TTY_CONFIG")},
	{unix.SYS_GET_MEMPOLICY, mustCapabilities("SYS_NICE")}, {unix.SYS_SET_MEMPOLICY, mustCapabilities("SYS_NICE")},
	{unix.SYS_MBIND, mustCapabilities("SYS_NICE")}, {unix.SYS_MOVE_PAGES, mustCapabilities("SYS_NICE")},
}

// seccompRules is every refusal of the architecture.
var seccompRules = append(append([]seccompRule(nil), seccompCommonRules...), seccompArchRules...)
