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

// Process is a process of a pod found in the process table (Linux only).
type Process struct {
	PID, PGID  int
	PodUID     string
	Container  string
	StartTicks uint64
	Leader     bool
}

// ScanProcesses returns an error: it needs Linux's /proc.
func ScanProcesses(func(podUID string) bool) ([]Process, error) { return nil, errUnsupportedOS }
