//go:build !linux

package processruntime

import (
	"os/exec"

	"k8s.io/apimachinery/pkg/types"
)

// Cgroups and pidfds are Linux's; elsewhere Open fails before any of these
// is reached.

type cgroupTree struct{ base string }

func openCgroupTree(string, string) (*cgroupTree, error)                 { return nil, errUnsupportedOS }
func useCgroupTree(string) (*cgroupTree, error)                          { return nil, errUnsupportedOS }
func cgroupOf(string) (string, error)                                    { return "", errUnsupportedOS }
func (*cgroupTree) podCgroup(types.UID) string                           { return "" }
func (*cgroupTree) newContainerCgroup(types.UID, string) (string, error) { return "", errUnsupportedOS }
func (*cgroupTree) newLeafCgroup(types.UID, string) (string, error)      { return "", errUnsupportedOS }
func (*cgroupTree) podCgroups() ([]types.UID, error)                     { return nil, errUnsupportedOS }
func (*cgroupTree) start(*exec.Cmd, types.UID, string) (string, error)   { return "", errUnsupportedOS }
func (*cgroupTree) startIn(*exec.Cmd, string) error                      { return errUnsupportedOS }
func (*cgroupTree) populated(string) (bool, error)                       { return false, errUnsupportedOS }
func (*cgroupTree) kill(string) error                                    { return errUnsupportedOS }
func (*cgroupTree) remove(string) error                                  { return errUnsupportedOS }
func (*cgroupTree) removeEmpty()                                         {}
func (*cgroupTree) setKilled(string, bool)                               {}
func killIfSame(int, uint64) bool                                        { return false }
