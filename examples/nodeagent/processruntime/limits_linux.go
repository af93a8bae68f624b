//go:build linux

package processruntime

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/internal/mountinfo"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/cgroupfs"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/osthread"
)

// This file enforces the pods' limits through cgroup controllers: those
// of the pods' cgroup v2 tree when it has them (enabled in its base's
// cgroup.subtree_control), else each controller's cgroup v1 hierarchy,
// under the agent's own cgroup there:
//
//	<v1 mount>/<agent's v1 cgroup>/podkit-<runtime ID>/pod-<uid>
//
// The v1 cgroups only limit: containment (killing, emptiness) stays the
// v2 tree's, or the process groups' and environment scan's. A process is
// born in a pod's v1 cgroups (a sandbox's init, started by a thread of the
// spawner that joined them, so the whole pod is inside; a process run
// without a sandbox, by startBorn), or put there just after it starts
// where its starting thread cannot join them.

// limitControllers are the controllers the runtime limits pods with.
var limitControllers = []string{"pids", "memory", "cpu"}

// cgroupV1RecordFile, in the state directory, names the v1 cgroups the
// runtime put its pods in, one "<controller> <directory>" a line, so a
// later run finds them even from another cgroup.
const cgroupV1RecordFile = "cgroup.v1"

// limiter enforces pods' limits.
type limiter struct {
	pids int64
	// v2 is the pods' cgroup v2 tree (nil: none) and v2Has the
	// controllers its pod cgroups have.
	v2    *cgroupTree
	v2Has map[string]bool
	// v1 holds, per controller limited through cgroup v1, the directory
	// of the runtime's cgroups in its hierarchy.
	v1 map[string]string
	// earlier holds the directories an earlier runtime of the state
	// directory recorded in hierarchies this one does not use (it ran
	// with other Options.Cgroups, or without a cgroup v2 tree): its pods'
	// cgroups there are only removed (remove, removeEmpty), never made.
	earlier map[string]string
	// rlimit: pids are bounded by RLIMIT_NPROC on the pod's host IDs (a
	// sandbox's), there being no pids controller.
	rlimit bool
}

// openLimiter finds how each limit can be enforced, creating the
// runtime's v1 cgroups where it needs them.
func openLimiter(stateDir string, tree *cgroupTree, pids int64, sandboxed bool) *limiter {
	l := &limiter{pids: pids, v2: tree, v2Has: map[string]bool{}, v1: map[string]string{}}
	if tree != nil {
		l.v2Has = tree.enableControllers(limitControllers)
	}
	recorded := readV1Record(stateDir)
	var lines []string
	controllers := limitControllers
	if tree == nil {
		// Not a limit: where the pods have no cgroup v2 (whose cpu.stat
		// every cgroup has), their CPU time is read from cpuacct
		// (stats.go).
		controllers = append(controllers[:len(controllers):len(controllers)], "cpuacct")
	}
	for _, c := range controllers {
		if l.v2Has[c] {
			continue
		}
		dir := recorded[c]
		if _, err := os.Stat(dir); dir == "" || err != nil {
			dir = v1Dir(c, stateDir)
		}
		if dir == "" {
			continue
		}
		l.v1[c] = dir
		lines = append(lines, c+" "+dir)
	}
	for c, dir := range recorded {
		if _, used := l.v1[c]; used || dir == "" {
			continue
		}
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if l.earlier == nil {
			l.earlier = map[string]string{}
		}
		l.earlier[c] = dir
		lines = append(lines, c+" "+dir)
	}
	if len(lines) > 0 {
		_ = os.WriteFile(filepath.Join(stateDir, cgroupV1RecordFile), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	}
	l.rlimit = pids > 0 && sandboxed && !l.v2Has["pids"] && l.v1["pids"] == ""
	return l
}

func readV1Record(stateDir string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join(stateDir, cgroupV1RecordFile))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		if c, dir, ok := strings.Cut(line, " "); ok {
			out[c] = dir
		}
	}
	return out
}

// v1Dir creates the runtime's directory in controller's v1 hierarchy,
// under the agent's own cgroup there; "" when there is none or it is not
// writable.
func v1Dir(controller, stateDir string) string {
	own := ""
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), controller) {
			own = parts[2]
		}
	}
	if own == "" {
		return ""
	}
	mounts, err := mountinfo.Read()
	if err != nil {
		return ""
	}
	for _, m := range mounts {
		if m.FSType != "cgroup" || !slices.Contains(strings.Split(m.Super, ","), controller) {
			continue
		}
		rel, err := filepath.Rel(m.Root, own)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		dir := filepath.Join(m.MountPoint, rel, "podkit-"+runtimeID(stateDir))
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return ""
		}
		return dir
	}
	return ""
}

// enableControllers enables those of names the tree's parent offers in
// its base's cgroup.subtree_control, and returns those the pods' cgroups
// then have.
func (t *cgroupTree) enableControllers(names []string) map[string]bool {
	has := map[string]bool{}
	offered, err := os.ReadFile(filepath.Join(t.base, "cgroup.controllers"))
	if err != nil {
		return has
	}
	for _, n := range names {
		if slices.Contains(strings.Fields(string(offered)), n) {
			_ = cgroupfs.Write(filepath.Join(t.base, "cgroup.subtree_control"), "+"+n)
		}
	}
	enabled, _ := os.ReadFile(filepath.Join(t.base, "cgroup.subtree_control"))
	for _, n := range strings.Fields(string(enabled)) {
		has[n] = true
	}
	return has
}

// kinds says how each limit is enforced.
func (l *limiter) kinds() Limits {
	how := func(c string) string {
		switch {
		case l.v2Has[c]:
			return "cgroup v2"
		case l.v1[c] != "":
			return "cgroup v1"
		}
		return ""
	}
	k := Limits{Pids: how("pids"), Memory: how("memory"), CPU: how("cpu")}
	if k.Pids == "" && l.rlimit {
		k.Pids = "RLIMIT_NPROC"
	}
	return k
}

// apply creates the pod's cgroups and writes its limits.
func (l *limiter) apply(uid types.UID, lim podLimits) error {
	write := func(dir, file, value string) error {
		if err := cgroupfs.Write(filepath.Join(dir, file), value); err != nil {
			return fmt.Errorf("setting %s of pod %s: %w", file, uid, err)
		}
		return nil
	}
	if l.v2 != nil && len(l.v2Has) > 0 {
		dir := l.v2.podCgroup(uid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating the pod's cgroup: %w", err)
		}
		if l.v2Has["pids"] && lim.pids > 0 {
			if err := write(dir, "pids.max", strconv.FormatInt(lim.pids, 10)); err != nil {
				return err
			}
		}
		if l.v2Has["memory"] && lim.memory > 0 {
			if err := write(dir, "memory.max", strconv.FormatInt(lim.memory, 10)); err != nil {
				return err
			}
		}
		if l.v2Has["cpu"] {
			if lim.cpuQuota > 0 {
				if err := write(dir, "cpu.max", fmt.Sprintf("%d %d", lim.cpuQuota, cpuPeriod)); err != nil {
					return err
				}
			}
			if err := write(dir, "cpu.weight", strconv.FormatUint(cpuWeight(lim.cpuShares), 10)); err != nil {
				return err
			}
		}
	}
	for c, base := range l.v1 {
		dir := filepath.Join(base, "pod-"+string(uid))
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating the pod's %s cgroup: %w", c, err)
		}
		var err error
		switch c {
		case "pids":
			if lim.pids > 0 {
				err = write(dir, "pids.max", strconv.FormatInt(lim.pids, 10))
			}
		case "memory":
			if lim.memory > 0 {
				err = write(dir, "memory.limit_in_bytes", strconv.FormatInt(lim.memory, 10))
			}
		case "cpu":
			if lim.cpuQuota > 0 {
				if err = write(dir, "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)); err == nil {
					err = write(dir, "cpu.cfs_quota_us", strconv.FormatInt(lim.cpuQuota, 10))
				}
			}
			if err == nil {
				err = write(dir, "cpu.shares", strconv.FormatUint(lim.cpuShares, 10))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// startBorn runs start, which starts a process, so that the process is
// born in the pod's v1 cgroups: start runs on an OS thread of its own that
// first joins them (cgroup v1 places threads, and a fork inherits its
// thread's cgroups), and the thread is discarded afterwards
// (osthread.Discarded), so no other work of the agent runs there. Placing
// the process after it started would leave what it did first outside:
// the memory it touched at once stays charged to the agent's cgroup, and
// what it forked at once is not limited.
//
// placed reports whether the process was born in them, and err is
// start's. When placed is false (no v1 limits, or the thread could not
// join one of them) start ran on the caller's thread and the caller
// places the process afterwards, which reports why it cannot. The
// agent's own memory stays charged where it was: cgroup v1 charges an
// address space's owner, the agent's main thread, so the starting
// thread's stay does not charge the pod with it.
func (l *limiter) startBorn(uid types.UID, start func() error) (placed bool, err error) {
	if len(l.v1) == 0 {
		return false, start()
	}
	type result struct {
		placed bool
		err    error
	}
	done := make(chan result, 1)
	osthread.Discarded(func() {
		join, leave := l.threadTasks(uid)
		if !cgroupfs.JoinThread(join, leave) {
			done <- result{}
			return
		}
		err := start()
		cgroupfs.LeaveThread(leave)
		done <- result{placed: true, err: err}
	})
	if res := <-done; res.placed {
		return true, res.err
	}
	return false, start()
}

// threadTasks returns the "tasks" files a thread joins to start a process
// born in the pod's v1 cgroups (join), and those of the runtime's own
// cgroups it goes back to after (leave), one of each per hierarchy; none
// without v1 limits.
func (l *limiter) threadTasks(uid types.UID) (join, leave []string) {
	for _, base := range l.v1 {
		join = append(join, filepath.Join(base, "pod-"+string(uid), "tasks"))
		leave = append(leave, filepath.Join(base, "tasks"))
	}
	return join, leave
}

// place puts process pid in the pod's v1 cgroups.
func (l *limiter) place(uid types.UID, pid int) error {
	for c, base := range l.v1 {
		if err := cgroupfs.Write(filepath.Join(base, "pod-"+string(uid), "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("putting process %d in the pod's %s cgroup: %w", pid, c, err)
		}
	}
	return nil
}

// remove removes the pod's v1 cgroups, which must hold no live process.
// A cgroup v1 directory stays busy while a zombie of the pod is not reaped
// (the init of an agent that crashed is the host init's to reap, which
// may take seconds): such a directory is left, and removed by removeEmpty
// (Close) or by the next Open; it limits nothing any more.
func (l *limiter) remove(uid types.UID) error {
	for c, base := range l.everyV1() {
		dir := filepath.Join(base, "pod-"+string(uid))
		err := syscall.Rmdir(dir)
		switch {
		case err == nil, errors.Is(err, syscall.ENOENT):
		case errors.Is(err, syscall.EBUSY) && !v1Populated(dir):
		default:
			return fmt.Errorf("removing the pod's %s cgroup (processes %s): %w", c, describeV1Procs(dir), err)
		}
	}
	return nil
}

// describeV1Procs names the processes listed in the v1 cgroup dir, each
// as PID (command, state, parent PID), for an error saying why the cgroup
// cannot be removed; a process gone meanwhile is named by its PID alone.
func describeV1Procs(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []string
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			out = append(out, f)
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			out = append(out, f+" (gone)")
			continue
		}
		comm, _ := os.ReadFile("/proc/" + f + "/comm")
		out = append(out, fmt.Sprintf("%d (%s, state %c, parent %d)", pid, strings.TrimSpace(string(comm)), st.state, st.ppid))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// v1Populated reports whether a live process is in the v1 cgroup dir. A
// zombie is listed in cgroup.procs until its parent reaps it (for the init
// of a crashed agent's pod, the host's init, which may take its time), but
// it runs nothing and is not counted.
func v1Populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return false
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return true
		}
		if st, err := readStat(pid); err == nil && !st.zombie() {
			return true
		}
	}
	return false
}

// v1Pods lists the pods that have a v1 cgroup.
func (l *limiter) v1Pods() []types.UID {
	seen := map[types.UID]bool{}
	var out []types.UID
	for _, base := range l.everyV1() {
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if uid, ok := strings.CutPrefix(e.Name(), "pod-"); ok && e.IsDir() && !seen[types.UID(uid)] {
				seen[types.UID(uid)] = true
				out = append(out, types.UID(uid))
			}
		}
	}
	return out
}

// killPod kills every process in the pod's v1 cgroups (a pod the state
// directory has no record of).
func (l *limiter) killPod(uid types.UID) {
	for _, base := range l.everyV1() {
		b, _ := os.ReadFile(filepath.Join(base, "pod-"+string(uid), "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// removeEmpty removes the v1 cgroups that hold no process, and the
// runtime's directories when nothing is left in them.
func (l *limiter) removeEmpty() {
	for _, uid := range l.v1Pods() {
		_ = l.remove(uid)
	}
	for _, base := range l.everyV1() {
		_ = syscall.Rmdir(base)
	}
}

// everyV1 is every v1 directory of the runtime's pods, per controller:
// those it uses and those an earlier runtime recorded (earlier; never
// a controller it uses).
func (l *limiter) everyV1() map[string]string {
	if len(l.earlier) == 0 {
		return l.v1
	}
	all := make(map[string]string, len(l.v1)+len(l.earlier))
	for c, dir := range l.v1 {
		all[c] = dir
	}
	for c, dir := range l.earlier {
		all[c] = dir
	}
	return all
}

// zombieWait bounds how long RemoveCgroups waits for v1 cgroups that
// only zombies keep busy: a zombie holds its v1 cgroup until reaped, and
// the orphans of a crashed agent (its pods' inits) are the host init's to
// reap, which some take seconds to do.
const zombieWait = 30 * time.Second

// removeV1Cgroups removes the v1 cgroups the runtime of stateDir made for
// its pods (as recorded there), waiting up to zombieWait for those whose
// processes were just killed to empty. The error names those that still
// hold a process.
func removeV1Cgroups(stateDir string) error {
	l := &limiter{v1: readV1Record(stateDir)}
	start := time.Now()
	for {
		l.removeEmpty()
		left := l.v1Pods()
		if len(left) == 0 {
			for _, base := range l.v1 {
				_ = syscall.Rmdir(base)
			}
			return nil
		}
		live := false
		for _, uid := range left {
			for _, base := range l.v1 {
				live = live || v1Populated(filepath.Join(base, "pod-"+string(uid)))
			}
		}
		// A live process fails soon; zombies only are waited for longer.
		if waited := time.Since(start); waited > zombieWait || live && waited > killedWait {
			return fmt.Errorf("%d cgroup v1 directories of %s still hold processes (first: pod %s)", len(left), stateDir, left[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
