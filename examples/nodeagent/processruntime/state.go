package processruntime

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The state directory holds one directory per pod UID:
//
//	<StateDir>/pods/<uid>/pod.json                 the pod's identity
//	<StateDir>/pods/<uid>/containers/<name>.json   the container's process and history
//	<StateDir>/pods/<uid>/logs/<name>/             the container's logs (see the logshim package):
//	    <instance>.<seq>.log                       log files in the CRI format, per instance (restart count)
//	    <instance>.lock                            held by the instance's log shim while it runs
//	<StateDir>/pods/<uid>/scratch/                 the default working directory
//
// It is what lets a restarted agent find the processes of its previous run.
//
// SyncTerminatedPod removes scratch/ and marks pod.json cleaned up: what is
// left is the pod's tombstone, its logs and its containers' final states.
// A restarted agent reads a tombstone back, so a pod that already finished
// is not run again while config still has it; PruneTombstones removes the
// tombstones of pods config no longer has.

const (
	podFile       = "pod.json"
	containersDir = "containers"
	logsDir       = "logs"
	scratchDir    = "scratch"
)

// podRecord is pod.json.
type podRecord struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	StartedAt time.Time `json:"startedAt"`
	// CleanedUp is true once SyncTerminatedPod succeeded: the directory is
	// a tombstone (logs and container records, no scratch directory).
	CleanedUp bool `json:"cleanedUp,omitempty"`
}

// containerRecord is containers/<name>.json: enough to find the container's
// process again after an agent restart, and to continue its history.
type containerRecord struct {
	Name string `json:"name"`
	Init bool   `json:"init,omitempty"`
	// Ephemeral: an ephemeral container (kubectl debug), run once.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// Starting is true while a process is being started: if the agent dies
	// then, the process (if any) is found by its environment instead.
	Starting bool `json:"starting,omitempty"`
	// PID, PGID and StartTicks name the running process (PID 0: none).
	// BootID is the boot StartTicks counts from.
	PID        int    `json:"pid,omitempty"`
	PGID       int    `json:"pgid,omitempty"`
	StartTicks uint64 `json:"startTicks,omitempty"`
	BootID     string `json:"bootID,omitempty"`
	// Cgroup is the cgroup the latest process was started in (empty
	// without cgroups), so that what it left there can be killed after an
	// agent restart.
	Cgroup    string    `json:"cgroup,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	Restarts  int       `json:"restarts,omitempty"`
	// Exit and LastExit are the latest exit and the one before it.
	Exit     *ExitStatus `json:"exit,omitempty"`
	LastExit *ExitStatus `json:"lastExit,omitempty"`
	// BackOff is the current restart delay, set at BackOffSetAt.
	BackOff      time.Duration `json:"backOff,omitempty"`
	BackOffSetAt time.Time     `json:"backOffSetAt,omitzero"`
}

// validUID reports whether uid can name a directory safely.
func validUID(uid types.UID) error {
	if uid == "" {
		return errors.New("the pod has no UID")
	}
	if !safeName(string(uid)) {
		return fmt.Errorf("pod UID %q cannot name a directory", uid)
	}
	return nil
}

// safeName reports whether s can be used as one path element.
func safeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

// writeJSON writes v to path atomically (a crash leaves the old or the new
// file, never half of one).
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// loadedPod is one pod directory read back at Open.
type loadedPod struct {
	dir        string
	pod        podRecord
	containers []containerRecord
}

// loadState reads every pod directory under podsDir. Unreadable entries are
// reported in errs and skipped, so one damaged directory cannot hide the
// processes of the others.
func loadState(podsDir string) (pods []loadedPod, errs []error) {
	entries, err := os.ReadDir(podsDir)
	if err != nil {
		return nil, []error{fmt.Errorf("reading the state directory: %w", err)}
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(podsDir, e.Name())
		lp := loadedPod{dir: dir}
		if err := readJSON(filepath.Join(dir, podFile), &lp.pod); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			// No identity: name the pod after its directory.
			lp.pod = podRecord{UID: types.UID(e.Name())}
		}
		if lp.pod.UID != types.UID(e.Name()) {
			errs = append(errs, fmt.Errorf("%s names pod UID %q; using the directory's name", filepath.Join(dir, podFile), lp.pod.UID))
			lp.pod.UID = types.UID(e.Name())
		}
		cents, err := os.ReadDir(filepath.Join(dir, containersDir))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		for _, ce := range cents {
			if ce.IsDir() || filepath.Ext(ce.Name()) != ".json" {
				continue
			}
			var cr containerRecord
			if err := readJSON(filepath.Join(dir, containersDir, ce.Name()), &cr); err != nil {
				errs = append(errs, err)
				continue
			}
			lp.containers = append(lp.containers, cr)
		}
		sort.Slice(lp.containers, func(i, j int) bool { return lp.containers[i].Name < lp.containers[j].Name })
		pods = append(pods, lp)
	}
	return pods, errs
}
