//go:build linux

package processruntime

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/podkit/podkit/examples/internal/mountinfo"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/cgroupfs"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds the operating system side of containment: cgroup v2
// directories and pidfds.

// cgroupTree is the cgroup v2 directory a runtime puts its pods in:
//
//	<base>/pod-<uid>/ctr-<container>.<n>
//
// One cgroup per pod, and in it one per container process (n tells the
// starts of one container apart), which holds the process and everything
// it starts. Killing a pod's cgroup (cgroup.kill) kills every process in
// it and below.
//
// Each start gets a cgroup never killed before: some kernels (seen on
// 6.18) kill at once a process started (CLONE_INTO_CGROUP) into a cgroup
// that cgroup.kill was once written to.
type cgroupTree struct {
	base string
	// noCloneInto is set once starting a process straight into its cgroup
	// (clone3 with CLONE_INTO_CGROUP) failed as unsupported: processes are
	// then moved into their cgroup just after they start.
	noCloneInto atomic.Bool

	mu sync.Mutex
	// killed holds the cgroups killed (cgroup.kill) that still exist:
	// their processes may not have ended yet when Close looks.
	killed map[string]bool
	// awaiting, when set (by tests), is called when removeEmpty starts to
	// wait for a killed cgroup to empty.
	awaiting func(dir string)
}

const cgroup2Magic = 0x63677270 // CGROUP2_SUPER_MAGIC

// useCgroupTree checks that base is a cgroup v2 directory the runtime can
// put processes in.
func useCgroupTree(base string) (*cgroupTree, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(base, &st); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", base, err)
	}
	if st.Type != cgroup2Magic {
		return nil, fmt.Errorf("%s is not in a cgroup v2 hierarchy", base)
	}
	f, err := os.OpenFile(filepath.Join(base, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s does not take processes: %w", base, err)
	}
	f.Close()
	return &cgroupTree{base: base}, nil
}

// openCgroupTree finds or creates the cgroup of the runtime of stateDir.
func openCgroupTree(stateDir, parent string) (*cgroupTree, error) {
	record := filepath.Join(stateDir, cgroupRecordFile)
	if b, err := os.ReadFile(record); err == nil {
		base := strings.TrimSpace(string(b))
		if parent == "" || filepath.Dir(base) == filepath.Clean(parent) {
			if t, err := useCgroupTree(base); err == nil {
				return t, nil
			}
		}
	}
	if parent == "" {
		var err error
		if parent, err = ownCgroup(); err != nil {
			return nil, err
		}
	}
	base := filepath.Join(parent, "podkit-"+runtimeID(stateDir))
	if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup v2 %s is not writable: %w", parent, err)
	}
	t, err := useCgroupTree(base)
	if err != nil {
		_ = syscall.Rmdir(base)
		return nil, err
	}
	if err := os.WriteFile(record, []byte(base+"\n"), 0o600); err != nil {
		_ = syscall.Rmdir(base)
		return nil, fmt.Errorf("recording the pods' cgroup: %w", err)
	}
	return t, nil
}

// ownCgroup returns the directory of the cgroup v2 the agent runs in.
func ownCgroup() (string, error) { return cgroupOf("self") }

// cgroupOf returns the directory of the cgroup v2 of process pid ("self":
// the agent).
func cgroupOf(pid string) (string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return "", fmt.Errorf("reading the cgroup of process %s: %w", pid, err)
	}
	path, found := "", false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path, found = p, true
		}
	}
	if !found {
		return "", fmt.Errorf("process %s is in no cgroup v2 hierarchy", pid)
	}
	mounts, err := mountinfo.Read()
	if err != nil {
		return "", fmt.Errorf("reading the mount table: %w", err)
	}
	for _, m := range mounts {
		if m.FSType != "cgroup2" {
			continue
		}
		rel, err := filepath.Rel(m.Root, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		return filepath.Join(m.MountPoint, rel), nil
	}
	return "", errors.New("no cgroup v2 hierarchy is mounted")
}

func (t *cgroupTree) podCgroup(uid types.UID) string {
	return filepath.Join(t.base, "pod-"+string(uid))
}

// newContainerCgroup creates a new cgroup for a process of container
// name of pod uid, removing the container's earlier ones that are empty.
func (t *cgroupTree) newContainerCgroup(uid types.UID, name string) (string, error) {
	return t.newLeafCgroup(uid, "ctr-"+name+".")
}

// newLeafCgroup creates a new cgroup of pod uid named prefix and a number,
// removing the empty ones of the same prefix.
func (t *cgroupTree) newLeafCgroup(uid types.UID, prefix string) (string, error) {
	pod := t.podCgroup(uid)
	if err := os.MkdirAll(pod, 0o755); err != nil {
		return "", fmt.Errorf("creating the pod's cgroup: %w", err)
	}
	entries, err := os.ReadDir(pod)
	if err != nil {
		return "", fmt.Errorf("listing the pod's cgroup: %w", err)
	}
	used := map[string]bool{}
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() || strings.Trim(n, "0123456789") != "" {
			continue
		}
		if syscall.Rmdir(filepath.Join(pod, e.Name())) != nil {
			used[e.Name()] = true
		} else {
			t.setKilled(filepath.Join(pod, e.Name()), false)
		}
	}
	for i := 0; ; i++ {
		dir := prefix + strconv.Itoa(i)
		if used[dir] {
			continue
		}
		err := os.Mkdir(filepath.Join(pod, dir), 0o755)
		if err == nil {
			return filepath.Join(pod, dir), nil
		}
		if !errors.Is(err, os.ErrExist) || i > len(used)+16 {
			return "", fmt.Errorf("creating the container's cgroup: %w", err)
		}
	}
}

// podCgroups lists the UIDs of the pods that have a cgroup.
func (t *cgroupTree) podCgroups() ([]types.UID, error) {
	entries, err := os.ReadDir(t.base)
	if err != nil {
		return nil, fmt.Errorf("listing cgroup %s: %w", t.base, err)
	}
	var uids []types.UID
	for _, e := range entries {
		if uid, ok := strings.CutPrefix(e.Name(), "pod-"); ok && e.IsDir() {
			uids = append(uids, types.UID(uid))
		}
	}
	return uids, nil
}

// start starts cmd in a new cgroup of container name of pod uid, and
// returns the cgroup. The process is born in it (CLONE_INTO_CGROUP) where
// the kernel allows, so not even a process it forks at once escapes;
// elsewhere it is moved there right after it starts. A process that
// cannot be put in its cgroup is killed and the start fails.
func (t *cgroupTree) start(cmd *exec.Cmd, uid types.UID, name string) (string, error) {
	return t.startLeaf(cmd, uid, "ctr-"+name+".")
}

func (t *cgroupTree) startLeaf(cmd *exec.Cmd, uid types.UID, prefix string) (string, error) {
	dir, err := t.newLeafCgroup(uid, prefix)
	if err != nil {
		return "", err
	}
	if err := t.startIn(cmd, dir); err != nil {
		_ = syscall.Rmdir(dir)
		return "", err
	}
	return dir, nil
}

func (t *cgroupTree) startIn(cmd *exec.Cmd, dir string) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !t.noCloneInto.Load() {
		fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening the container's cgroup: %w", err)
		}
		template := *cmd
		attr := *cmd.SysProcAttr
		attr.UseCgroupFD, attr.CgroupFD = true, fd
		cmd.SysProcAttr = &attr
		err = cmd.Start()
		syscall.Close(fd)
		if err == nil || !cgroupfs.CloneIntoUnsupported(err) {
			return err
		}
		t.noCloneInto.Store(true)
		*cmd = template
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := cgroupfs.Write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("putting the process in the container's cgroup: %w", err)
	}
	return nil
}

// populated reports whether any process is in the cgroup dir or below. A
// missing cgroup holds none.
func (t *cgroupTree) populated(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading cgroup %s: %w", dir, err)
	}
	return bytes.Contains(b, []byte("populated 1")), nil
}

// kill sends SIGKILL to every process in the cgroup dir and below. A
// missing cgroup is not an error. Kernels before 5.14 have no cgroup.kill:
// each process listed is then killed, which a process forking fast may
// race; the callers check again until the cgroup is empty.
func (t *cgroupTree) kill(dir string) error {
	err := cgroupfs.Write(filepath.Join(dir, "cgroup.kill"), "1")
	switch {
	case err == nil:
		t.setKilled(dir, true)
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("killing cgroup %s: %w", dir, err)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	t.setKilled(dir, true)
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return nil
	})
}

// remove removes the cgroup dir and the cgroups below it. A cgroup still
// holding a process cannot be removed: the error says so. A missing
// cgroup is not an error.
func (t *cgroupTree) remove(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		t.setKilled(dir, false)
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing cgroup %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := t.remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("removing cgroup %s: %w", dir, err)
	}
	t.setKilled(dir, false)
	return nil
}

// removeEmpty removes the cgroups of the pods that hold no process, and
// the base when nothing is left in it, after waiting up to killedWait for
// the cgroups the runtime killed to empty (their processes were sent
// SIGKILL but may not have ended yet). Errors are ignored: what holds a
// process stays for a later run.
func (t *cgroupTree) removeEmpty() {
	t.awaitKilled(killedWait)
	uids, _ := t.podCgroups()
	for _, uid := range uids {
		dir := t.podCgroup(uid)
		if populated, err := t.populated(dir); err == nil && !populated {
			_ = t.remove(dir)
		}
	}
	_ = syscall.Rmdir(t.base)
}

// The pidfd system calls (the same number on every architecture).
const (
	sysPidfdSendSignal = 424
	sysPidfdOpen       = 434
)

// killIfSame sends SIGKILL to pid if it is still the live process that
// started at startTicks, and reports whether it did. Through a pidfd the
// check and the kill name the same process even if it ends in between and
// its PID is reused; kernels without pidfds (before 5.3) get a plain kill
// right after the check.
func killIfSame(pid int, startTicks uint64) bool {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ENOSYS {
		if !sameProcess(pid, startTicks) {
			return false
		}
		return syscall.Kill(pid, syscall.SIGKILL) == nil
	}
	if errno != 0 {
		return false
	}
	defer syscall.Close(int(fd))
	if !sameProcess(pid, startTicks) {
		return false
	}
	_, _, errno = syscall.Syscall6(sysPidfdSendSignal, fd, uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	return errno == 0
}
