//go:build !linux

package cgroupfs

// JoinThread reports false: only Linux has cgroups for a thread to join.
func JoinThread(join, leave []string) bool { return false }

// LeaveThread does nothing: only Linux has cgroups for a thread to leave.
func LeaveThread(leave []string) {}
