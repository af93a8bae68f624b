//go:build linux

package processruntime

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// This file is the runtime's only contact with the operating system's
// process table: reading /proc, waiting for an exit without reaping, and
// signalling process groups.

// supported reports whether this operating system can run the runtime.
const supported = true

// procStat is what the runtime reads from /proc/<pid>/stat.
type procStat struct {
	pid, ppid, pgrp int
	state           byte
	// startTicks is when the process started, in clock ticks since boot.
	// Together with the boot ID it names one process for good: a reused
	// PID has another start time.
	startTicks uint64
}

func (s procStat) zombie() bool { return s.state == 'Z' || s.state == 'X' }

// readStat reads /proc/<pid>/stat. It returns an error wrapping
// os.ErrNotExist when no such process exists.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// parseStat parses one /proc/<pid>/stat line. The command name (field 2)
// may hold spaces and parentheses, so fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open || end+2 > len(b) {
		return procStat{}, fmt.Errorf("malformed /proc stat line %q", b)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return procStat{}, fmt.Errorf("malformed pid in /proc stat line %q", b)
	}
	// rest[0] is field 3 (state), so field N is rest[N-3].
	rest := strings.Fields(string(b[end+2:]))
	if len(rest) < 20 {
		return procStat{}, fmt.Errorf("short /proc stat line for pid %d", pid)
	}
	s := procStat{pid: pid, state: rest[0][0]}
	if s.ppid, err = strconv.Atoi(rest[1]); err != nil {
		return procStat{}, fmt.Errorf("malformed ppid for pid %d: %w", pid, err)
	}
	if s.pgrp, err = strconv.Atoi(rest[2]); err != nil {
		return procStat{}, fmt.Errorf("malformed pgrp for pid %d: %w", pid, err)
	}
	if s.startTicks, err = strconv.ParseUint(rest[19], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("malformed start time for pid %d: %w", pid, err)
	}
	return s, nil
}

// listPIDs returns the PIDs in /proc.
func listPIDs() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("reading the process table: %w", err)
	}
	pids := make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// bootID names the current boot; start times are only comparable within one.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("reading the boot ID: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// sameProcess reports whether pid is still the live (not zombie) process
// that started at startTicks.
func sameProcess(pid int, startTicks uint64) bool {
	s, err := readStat(pid)
	return err == nil && s.startTicks == startTicks && !s.zombie()
}

// groupMembers returns the live (not zombie) processes of process group
// pgid whose leader was the process (pgid, leaderStart). When another
// process now holds the leader's PID, the group's ID was released and
// reused, so nothing of the original group remains and none is returned:
// the kernel keeps a process group's ID from being reused as a PID while
// any member of the group lives.
func groupMembers(pgid int, leaderStart uint64) ([]int, error) {
	pids, err := listPIDs()
	if err != nil {
		return nil, err
	}
	var members []int
	for _, pid := range pids {
		s, err := readStat(pid)
		if err != nil || s.pgrp != pgid {
			continue
		}
		if pid == pgid && s.startTicks != leaderStart {
			return nil, nil
		}
		if !s.zombie() {
			members = append(members, pid)
		}
	}
	return members, nil
}

// signalGroup sends sig to every process of group pgid. A group that no
// longer exists is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("sending %v to process group %d: %w", sig, pgid, err)
	}
	return nil
}

// waitExitedNoReap blocks until the child pid has exited, without reaping
// it: until it is reaped its PID, and so its process group ID, cannot be
// reused, which makes signalling the group afterwards safe.
func waitExitedNoReap(pid int) error {
	const (
		pPID    = 1
		wEXITED = 0x4
		wNOWAIT = 0x1000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wEXITED|wNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return fmt.Errorf("waiting for process %d: %w", pid, errno)
		}
	}
}

// Process is a process of a pod found in the process table by the
// environment variables the runtime gives every container process (see
// EnvPodUID). Scanning for them needs no bookkeeping, so it shows what the
// operating system runs, whatever the runtime believes.
type Process struct {
	// PID is the process's ID; PGID its process group's.
	PID, PGID int
	// PodUID and Container come from the process's environment; a process
	// the container started inherits them unless it cleared its
	// environment. Container is empty for the pod's sandbox (its init, or
	// its init), which Sandbox marks.
	PodUID    string
	Container string
	Sandbox   bool
	// RuntimeID is the EnvRuntimeID of the runtime that started it.
	RuntimeID string
	// StartTicks is the process's start time in clock ticks since boot.
	StartTicks uint64
	// Leader is true for the process that leads its group: the container's
	// main process (never the sandbox's).
	Leader bool
}

// ScanProcesses returns every live (not zombie) process of the machine that
// carries the runtime's pod environment variables (a sandbox's init
// among them) and whose pod UID passes
// match (nil: any). Processes whose environment cannot be read (another
// user's, or gone meanwhile) are skipped. It reads the whole process
// table; it is meant for diagnostics and tests.
func ScanProcesses(match func(podUID string) bool) ([]Process, error) {
	pids, err := listPIDs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []Process
	for _, pid := range pids {
		if pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil || !bytes.Contains(env, []byte(EnvPodUID+"=")) {
			continue
		}
		var uid, name, runtimeID string
		for _, kv := range bytes.Split(env, []byte{0}) {
			k, v, _ := strings.Cut(string(kv), "=")
			switch k {
			case EnvPodUID:
				uid = v
			case EnvContainerName:
				name = v
			case EnvRuntimeID:
				runtimeID = v
			}
		}
		if uid == "" || (match != nil && !match(uid)) {
			continue
		}
		s, err := readStat(pid)
		if err != nil || s.zombie() {
			continue
		}
		out = append(out, Process{PID: pid, PGID: s.pgrp, PodUID: uid, Container: name, Sandbox: name == "", RuntimeID: runtimeID, StartTicks: s.startTicks, Leader: s.pgrp == pid && name != ""})
	}
	return out, nil
}

// killChild kills and reaps a child of the runtime's that nothing else
// waits for.
func killChild(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			return
		}
	}
}
