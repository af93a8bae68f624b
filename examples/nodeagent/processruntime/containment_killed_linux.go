//go:build linux

package processruntime

import (
	"slices"
	"time"
)

// This file keeps track of the cgroups a runtime killed, so that Close
// can wait for them to empty and remove them instead of leaving empty
// cgroups behind: a process sent SIGKILL leaves its cgroup a moment
// later, not at once.

// killedWait bounds how long Close waits for the cgroups the runtime
// killed to empty before removing them. A killed process normally leaves
// its cgroup within milliseconds; one that does not (stuck in the kernel)
// keeps its cgroup for a later run.
const killedWait = time.Second

// setKilled records that the cgroup dir was killed, or (killed false)
// forgets it once it is removed.
func (t *cgroupTree) setKilled(dir string, killed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case killed && t.killed == nil:
		t.killed = map[string]bool{dir: true}
	case killed:
		t.killed[dir] = true
	default:
		delete(t.killed, dir)
	}
}

// awaitKilled waits, up to limit in all, for each cgroup the runtime
// killed to empty, and removes those that did. The wait is in real time:
// it is the kernel's work, whatever the runtime's clock.
func (t *cgroupTree) awaitKilled(limit time.Duration) {
	t.mu.Lock()
	dirs := make([]string, 0, len(t.killed))
	for dir := range t.killed {
		dirs = append(dirs, dir)
	}
	awaiting := t.awaiting
	t.mu.Unlock()
	slices.Sort(dirs)
	deadline := time.Now().Add(limit)
	for _, dir := range dirs {
		for first := true; ; first = false {
			populated, err := t.populated(dir)
			if err != nil {
				break
			}
			if !populated {
				_ = t.remove(dir)
				break
			}
			if time.Now().After(deadline) {
				break
			}
			if first && awaiting != nil {
				awaiting(dir)
			}
			time.Sleep(settleInterval)
		}
	}
}
