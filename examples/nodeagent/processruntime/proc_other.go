//go:build !linux

package processruntime

import (
	"errors"
	"syscall"
)

// The runtime reads /proc, so it runs on Linux only; elsewhere Open fails
// with a clear error and these are never reached.

const supported = false

var errUnsupportedOS = errors.New("processruntime: only Linux is supported")

type procStat struct {
	pid, ppid, pgrp int
	state           byte
	startTicks      uint64
}

func readStat(int) (procStat, error)          { return procStat{}, errUnsupportedOS }
func bootID() (string, error)                 { return "", errUnsupportedOS }
func sameProcess(int, uint64) bool            { return false }
func groupMembers(int, uint64) ([]int, error) { return nil, errUnsupportedOS }
func signalGroup(int, syscall.Signal) error   { return errUnsupportedOS }
func waitExitedNoReap(int) error              { return errUnsupportedOS }
func awaitExit(int)                           {}

// Process is a process of a pod found in the process table (Linux only).
type Process struct {
	// PID is the process's ID; PGID its process group's.
	PID, PGID int
	// PodUID and Container come from the process's environment.
	PodUID    string
	Container string
	Sandbox   bool
	// RuntimeID is the EnvRuntimeID of the runtime that started it.
	RuntimeID string
	// StartTicks is the process's start time in clock ticks since boot.
	StartTicks uint64
	// Leader is true for the container's main process.
	Leader bool
}

// ScanProcesses returns an error: it needs Linux's /proc.
func ScanProcesses(func(podUID string) bool) ([]Process, error) { return nil, errUnsupportedOS }
func killChild(int)                                             {}
