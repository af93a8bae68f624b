package processruntime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RemoveCgroups removes the cgroups the process runtime of stateDir made
// for its pods, and its own cgroups, once no process is left in them: its
// cgroup v2 tree and the cgroup v1 directories it limits pods with.
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
//
// It also drops, from DefaultIDRegistry, the claims of the ranges of host
// IDs that stateDir's pods held (their processes are gone: the ranges are
// free for other pods at once, rather than once found stale).
func RemoveCgroups(stateDir string) error {
	releaseIDClaims(stateDir)
	v1err := removeV1Cgroups(stateDir)
	if v1err != nil {
		v1err = fmt.Errorf("processruntime: %w", v1err)
	}
	return errors.Join(removeV2Cgroups(stateDir), v1err)
}

// removeV2Cgroups removes the pods' cgroup v2 tree (see RemoveCgroups).
func removeV2Cgroups(stateDir string) error {
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
	uids, err := t.podCgroups()
	if err != nil {
		return fmt.Errorf("processruntime: %w", err)
	}
	// The caller killed what the cgroups held: wait for them to empty as
	// for cgroups this runtime killed itself, and remove what did.
	for _, uid := range uids {
		t.setKilled(t.podCgroup(uid), true)
	}
	t.removeEmpty()
	if _, err := os.Stat(base); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	left, _ := t.podCgroups()
	first := base
	if len(left) > 0 {
		first = t.podCgroup(left[0])
	}
	return fmt.Errorf("processruntime: %d cgroups of %s still hold processes (first: %s)", len(left), stateDir, first)
}
