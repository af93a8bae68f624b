package processruntime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// removeCgroupsWait bounds how long RemoveCgroups waits for cgroups whose
// processes were just killed to empty.
const removeCgroupsWait = time.Second

// RemoveCgroups removes the cgroups the process runtime of stateDir made
// for its pods, and its own cgroup, once no process is left in them.
//
// A Runtime's Close removes the cgroups that hold no process and keeps
// those of pods still running, for a later Runtime on stateDir to adopt.
// A harness or an uninstaller that stops the pods' processes itself, with
// no Runtime open on stateDir, calls RemoveCgroups after it so that no
// empty cgroup is left on the machine. It waits up to a second for cgroups
// whose processes were just sent SIGKILL to empty, and returns an error
// naming those that still hold a process (they stay). A state directory
// whose runtime made no cgroup (CgroupsOff, a machine without a writable
// cgroup v2, not Linux) is not an error. Call it from any goroutine, but
// not while a Runtime uses stateDir.
func RemoveCgroups(stateDir string) error {
	b, err := os.ReadFile(filepath.Join(stateDir, cgroupRecordFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("processruntime: reading the pods' cgroup: %w", err)
	}
	base := strings.TrimSpace(string(b))
	if _, err := os.Stat(base); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	t, err := useCgroupTree(base)
	if err != nil {
		return fmt.Errorf("processruntime: %w", err)
	}
	deadline := time.Now().Add(removeCgroupsWait)
	for {
		uids, err := t.podCgroups()
		if err != nil {
			return fmt.Errorf("processruntime: %w", err)
		}
		var busy []string
		for _, uid := range uids {
			dir := t.podCgroup(uid)
			populated, err := t.populated(dir)
			if err != nil {
				return fmt.Errorf("processruntime: %w", err)
			}
			if populated {
				busy = append(busy, dir)
				continue
			}
			if err := t.remove(dir); err != nil {
				busy = append(busy, dir)
			}
		}
		if len(busy) == 0 {
			if err := t.remove(base); err != nil {
				return fmt.Errorf("processruntime: %w", err)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processruntime: %d cgroups of %s still hold processes (first: %s)", len(busy), stateDir, busy[0])
		}
		time.Sleep(10 * time.Millisecond) // the kernel empties a killed cgroup shortly
	}
}
