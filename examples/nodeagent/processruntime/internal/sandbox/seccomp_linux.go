//go:build linux

package sandbox

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The RuntimeDefault seccomp filter, written here as a classic BPF
// program (no libseccomp). It has the effect of the default profile of
// Docker and containerd, which allow a long list of system calls and
// refuse the rest, written the other way round: it refuses, with EPERM,
// the system calls that profile leaves out or guards with a capability
// the process does not hold, and allows the others:
//
//   - always: loading or creating kernel modules the old way
//     (create_module, get_kernel_syms, query_module), kexec_load and
//     kexec_file_load, the kernel keyring (add_key, keyctl, request_key),
//     swapon/swapoff, nfsservctl, uselib, ustat, sysfs, _sysctl, vm86,
//     userfaultfd, io_uring (io_uring_setup, _enter, _register), and
//     clone3 (ENOSYS, so the C library falls back on clone, whose flags
//     the filter can see);
//   - clone with any CLONE_NEW* flag, unshare, setns, mount, umount2,
//     pivot_root, the new mount API (fsopen, fsconfig, fsmount, fspick,
//     move_mount, open_tree, mount_setattr), name_to_handle_at,
//     open_by_handle_at, quotactl, quotactl_fd, lookup_dcookie,
//     fanotify_init, sethostname, setdomainname, unless it holds
//     CAP_SYS_ADMIN;
//   - bpf without CAP_SYS_ADMIN or CAP_BPF; perf_event_open without
//     CAP_SYS_ADMIN or CAP_PERFMON; syslog without CAP_SYS_ADMIN or
//     CAP_SYSLOG; reboot without CAP_SYS_BOOT; init_module, finit_module
//     and delete_module without CAP_SYS_MODULE; acct without
//     CAP_SYS_PACCT; kcmp, pidfd_getfd and process_madvise without
//     CAP_SYS_PTRACE; iopl and ioperm without CAP_SYS_RAWIO; settimeofday,
//     clock_settime and clock_adjtime without CAP_SYS_TIME; vhangup
//     without CAP_SYS_TTY_CONFIG; get_mempolicy, set_mempolicy, mbind and
//     move_pages without CAP_SYS_NICE;
//   - personality, but for the personalities the default profile allows
//     (0, 0x8, 0x20000, 0x20008 and the 0xffffffff query);
//   - every system call of another architecture than the agent's (a
//     32-bit program cannot run under the filter), and on amd64 the x32
//     ones.
//
// ptrace and process_vm_readv/writev stay allowed, as the default
// profile allows them on kernels since 4.8 (the capability and Yama
// checks still apply). The filter differs from a profile compiled by
// libseccomp in what it allows that the allowlist does not name (system
// calls added to Linux after the list was written): it allows them.

// seccompRule refuses a system call unless the process holds one of caps
// (0: always).
type seccompRule struct {
	nr   uint32
	caps CapabilitySet
}

// The classic BPF instructions the filter uses.
const (
	bpfLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJsetK  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K

	seccompRetAllow = 0x7fff0000
	seccompRetErrno = 0x00050000

	// Offsets in struct seccomp_data.
	offNR   = 0
	offArch = 4
	offArg0 = 16 // the low 32 bits of args[0], little-endian

	cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
)

var allowedPersonalities = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, K: k, Jt: jt, Jf: jf}
}

// seccompFilter builds the RuntimeDefault program for a process holding
// caps.
func seccompFilter(caps CapabilitySet) ([]unix.SockFilter, error) {
	if seccompArch == 0 {
		return nil, errors.New("the RuntimeDefault seccomp filter is not written for this architecture")
	}
	deny := stmt(bpfRetK, seccompRetErrno|uint32(unix.EPERM))
	prog := []unix.SockFilter{
		stmt(bpfLdAbsW, offArch),
		jump(bpfJeqK, seccompArch, 1, 0),
		deny,
		stmt(bpfLdAbsW, offNR),
	}
	if seccompX32 {
		prog = append(prog, jump(bpfJgeK, 0x40000000, 0, 1), deny)
	}
	for _, r := range seccompRules {
		if r.caps != 0 && caps&r.caps != 0 {
			continue
		}
		prog = append(prog, jump(bpfJeqK, r.nr, 0, 1), deny)
	}
	prog = append(prog, jump(bpfJeqK, uint32(unix.SYS_CLONE3), 0, 1), stmt(bpfRetK, seccompRetErrno|uint32(unix.ENOSYS)))
	// personality: only the allowed values of its argument.
	prog = append(prog, jump(bpfJeqK, uint32(unix.SYS_PERSONALITY), 0, uint8(len(allowedPersonalities)+3)), stmt(bpfLdAbsW, offArg0))
	for i, p := range allowedPersonalities {
		prog = append(prog, jump(bpfJeqK, p, uint8(len(allowedPersonalities)-i), 0))
	}
	prog = append(prog, deny, stmt(bpfRetK, seccompRetAllow))
	if !caps.Has(capSysAdmin) {
		// clone: no new namespaces. Last, as it loads the argument.
		prog = append(prog,
			jump(bpfJeqK, uint32(unix.SYS_CLONE), 0, 3),
			stmt(bpfLdAbsW, offArg0),
			jump(bpfJsetK, cloneNamespaces, 0, 1),
			deny)
	}
	prog = append(prog, stmt(bpfRetK, seccompRetAllow))
	if len(prog) > 4096 {
		return nil, errors.New("the seccomp filter is too long")
	}
	return prog, nil
}

var capSysAdmin = mustCapabilities("SYS_ADMIN")

// installSeccomp installs the RuntimeDefault filter on this thread (it
// is inherited across execve). The caller holds CAP_SYS_ADMIN in its user
// namespace or has set no_new_privs.
func installSeccomp(caps CapabilitySet) error {
	prog, err := seccompFilter(caps)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return e
	}
	return nil
}

// SeccompSupported reports whether the RuntimeDefault filter exists for
// the agent's architecture.
func SeccompSupported() bool { return seccompArch != 0 }
