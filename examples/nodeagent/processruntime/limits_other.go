//go:build !linux

package processruntime

import "k8s.io/apimachinery/pkg/types"

// Limits are Linux's cgroups; elsewhere Open fails before they are needed.

type limiter struct {
	v1     map[string]string
	rlimit bool
}

func openLimiter(string, *cgroupTree, int64, bool) *limiter              { return &limiter{} }
func (*limiter) kinds() Limits                                           { return Limits{} }
func (*limiter) apply(types.UID, podLimits) error                        { return errUnsupportedOS }
func (*limiter) place(types.UID, int) error                              { return errUnsupportedOS }
func (*limiter) startBorn(_ types.UID, start func() error) (bool, error) { return false, start() }
func (*limiter) remove(types.UID) error                                  { return nil }
func (*limiter) threadTasks(types.UID) (join, leave []string)            { return nil, nil }
func (*limiter) v1Pods() []types.UID                                     { return nil }
func (*limiter) killPod(types.UID)                                       {}
func (*limiter) removeEmpty()                                            {}
func removeV1Cgroups(string) error                                       { return nil }
func readV1Record(string) map[string]string                              { return map[string]string{} }
