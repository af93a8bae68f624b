package processruntime

import (
	"context"
	"fmt"
	"hash/fnv"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// This file is the runtime's containment: how it knows every process a pod
// started, wherever the process went, so that all of them stop with the
// pod. See "Containment" in the package doc for what it can and cannot
// contain.

// CgroupMode says whether the runtime puts each pod in a cgroup.
type CgroupMode int

const (
	// CgroupsAuto uses a cgroup v2 per pod when a writable cgroup v2
	// hierarchy is found, and otherwise falls back to process groups and
	// the environment scan (Runtime.Containment says which, and why).
	CgroupsAuto CgroupMode = iota
	// CgroupsOff never uses cgroups: process groups and the environment
	// scan only.
	CgroupsOff
	// CgroupsRequired makes Open fail when no writable cgroup v2 hierarchy
	// is found.
	CgroupsRequired
)

// String returns "auto", "off" or "required".
func (m CgroupMode) String() string {
	switch m {
	case CgroupsAuto:
		return "auto"
	case CgroupsOff:
		return "off"
	case CgroupsRequired:
		return "required"
	}
	return fmt.Sprintf("CgroupMode(%d)", int(m))
}

// Containment says how a Runtime contains the processes of its pods,
// isolates them (Sandbox) and limits them (Limits).
type Containment struct {
	// Cgroup is the cgroup v2 directory that holds one cgroup per pod
	// (and in it one per container); empty when no cgroup is used.
	Cgroup string
	// Fallback says why no cgroup is used; empty when one is.
	Fallback string
	// Sandbox is true when every pod runs in a sandbox of its own;
	// SandboxFallback says why not, when not.
	Sandbox         bool
	SandboxFallback string
	// Limits says how each kind of pod limit is enforced; Limits.Missing
	// lists those the machine lacks, for the Node's conditions or events.
	Limits Limits
	// Network says how pods are networked: the host's network, a
	// namespace each with a loopback only, or on the node's bridge.
	Network string
}

// String describes the containment in one line, for an agent's startup
// message.
func (c Containment) String() string {
	var b strings.Builder
	if c.Cgroup != "" {
		b.WriteString("a cgroup v2 per pod, under " + c.Cgroup)
	} else {
		b.WriteString("process groups and the environment scan (" + c.Fallback + ")")
	}
	if c.Sandbox {
		b.WriteString("; a sandbox per pod (user, mount, PID, IPC, UTS and network namespaces)")
	} else {
		b.WriteString("; no sandbox: pods run in the host's namespaces, as the agent's user (" + c.SandboxFallback + ")")
	}
	for _, k := range []struct{ kind, how string }{{"pids", c.Limits.Pids}, {"memory", c.Limits.Memory}, {"cpu", c.Limits.CPU}} {
		if k.how != "" {
			b.WriteString("; " + k.kind + " limited through " + k.how)
		}
	}
	if c.Network != "" {
		b.WriteString("; " + c.Network)
	}
	if m := c.Limits.Missing(); len(m) > 0 {
		b.WriteString("; not limited (the machine has no controller for it): " + strings.Join(m, ", "))
	}
	return b.String()
}

// Containment returns how the runtime contains, isolates and limits the
// processes of its pods. It is fixed at Open.
func (r *Runtime) Containment() Containment {
	c := Containment{Fallback: r.noCgroupReason, Sandbox: r.sandboxes != nil, SandboxFallback: r.noSandboxReason, Limits: r.limits.kinds(), Network: r.networkDescription()}
	if r.cgroups != nil {
		c.Cgroup, c.Fallback = r.cgroups.base, ""
	}
	return c
}

// runtimeID names the runtime of a state directory (an absolute path): it
// is the EnvRuntimeID of the processes it starts, and names its cgroup.
func runtimeID(stateDir string) string {
	h := fnv.New64a()
	h.Write([]byte(stateDir))
	return strconv.FormatUint(h.Sum64(), 16)
}

// Processes returns the live processes the runtime's pods started that are
// still in the process table (found by EnvRuntimeID, so they include what
// an earlier run on the same state directory started, and not what
// another runtime did). Once every pod has stopped there should be none:
// an agent can check that at shutdown, and kill what it finds with
// KillProcesses. It reads the whole process table.
func (r *Runtime) Processes() ([]Process, error) {
	all, err := ScanProcesses(nil)
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, p := range all {
		if p.RuntimeID == r.id {
			out = append(out, p)
		}
	}
	return out, nil
}

// cgroupRecordFile, in the state directory, names the cgroup the runtime
// put its pods in, so that a later run finds them even when it runs in
// another cgroup itself.
const cgroupRecordFile = "cgroup"

// sandboxCgroupPrefix names the cgroups of a pod's sandbox init: no
// container's, whose names hold no '_'.
const sandboxCgroupPrefix = "sandbox_."

// openContainment chooses the containment at Open: the cgroup recorded by
// an earlier run on stateDir if it still exists, else a new one under
// parent (default: the agent's own cgroup), named after stateDir.
func (r *Runtime) openContainment(stateDir string, mode CgroupMode, parent string) error {
	if mode == CgroupsOff {
		r.noCgroupReason = "cgroups are turned off"
		return nil
	}
	if mode != CgroupsAuto && mode != CgroupsRequired {
		return fmt.Errorf("processruntime: unknown Options.Cgroups %v", mode)
	}
	tree, err := openCgroupTree(stateDir, parent)
	if err != nil {
		if mode == CgroupsRequired || parent != "" {
			return fmt.Errorf("processruntime: %w", err)
		}
		r.noCgroupReason = err.Error()
		r.log.Info("No cgroup for the pods: their processes are contained by process group and environment only", "reason", err.Error())
		return nil
	}
	r.cgroups = tree
	return nil
}

// startContained starts cmd as a process of container name of pod uid,
// inside the pod's containment: with a cgroup, the process starts in a new
// cgroup of the container, in the pod's (and so does everything it
// starts), whose path it returns; without, it is known by its process
// group and environment only, and the path is empty. Any process a pod
// starts must be started through it.
func (r *Runtime) startContained(cmd *exec.Cmd, uid types.UID, name string) (cgroup string, err error) {
	if r.cgroups == nil {
		return "", cmd.Start()
	}
	return r.cgroups.start(cmd, uid, name)
}

// killContainerLeftovers kills what a container process left behind
// outside its process group once it has ended: the rest of its cgroup, or
// without one (cgroup is empty), every process carrying the pod's UID and
// the container's name in its environment. Either way nothing of the
// container holds its output any more, so its log shim ends. It does not
// wait for them to be gone.
func (r *Runtime) killContainerLeftovers(uid types.UID, name, cgroup string) {
	if cgroup != "" {
		r.killContainerCgroup(uid, name, cgroup)
		return
	}
	found, err := ScanProcesses(func(u string) bool { return u == string(uid) })
	if err != nil {
		r.log.Error(err, "Cannot look for what a container left behind", "pod", uid, "container", name)
		return
	}
	for _, p := range found {
		if p.Container == name && killIfSame(p.PID, p.StartTicks) {
			r.log.V(2).Info("Killed a process a container left outside its process group", "pod", uid, "container", name, "pid", p.PID)
		}
	}
}

// killContainerCgroup kills what is left in a container process's cgroup
// (empty: it had none).
func (r *Runtime) killContainerCgroup(uid types.UID, name, cgroup string) {
	if r.cgroups == nil || cgroup == "" {
		return
	}
	if err := r.cgroups.kill(cgroup); err != nil {
		r.log.Error(err, "Cannot kill what a container left behind in its cgroup", "pod", uid, "container", name)
	}
}

// After killing, sweepPod looks again settleChecks times every
// settleInterval of real time before it polls on the runtime's clock; an
// environment scan that finds nothing is confirmed by one more,
// settleInterval later.
const (
	settleChecks   = 50
	settleInterval = 2 * time.Millisecond
)

// sweepPod kills every process left of pod uid once its containers' main
// processes have ended, and waits until none is left (up to
// Options.KillTimeout): the pod's cgroup, and, without cgroups or when
// scanEnv is set (the pod may predate the cgroup, or its records may be
// lost), every process carrying the pod's UID in its environment. The
// error says what still runs.
func (r *Runtime) sweepPod(ctx context.Context, uid types.UID, scanEnv bool) error {
	scanEnv = scanEnv || r.cgroups == nil
	deadline := r.clock.NewTimer(r.killTimeout)
	defer deadline.Stop()
	var ticker clock.Ticker
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	clean := 0
	for attempt := 0; ; attempt++ {
		left := 0
		if r.cgroups != nil {
			dir := r.cgroups.podCgroup(uid)
			populated, err := r.cgroups.populated(dir)
			if err != nil {
				return err
			}
			if populated {
				left++
				if err := r.cgroups.kill(dir); err != nil {
					return err
				}
			}
		}
		if scanEnv {
			found, err := ScanProcesses(func(u string) bool { return u == string(uid) })
			if err != nil {
				return err
			}
			for _, p := range found {
				if killIfSame(p.PID, p.StartTicks) {
					left++
				}
			}
		}
		if left == 0 {
			// A process in the middle of its execve shows no environment
			// (the new program's is not in place yet), so a scan can miss
			// it: it counts as clean only when the next one, a moment
			// later, is clean too.
			if clean++; !scanEnv || clean >= 2 {
				return nil
			}
			time.Sleep(settleInterval)
			continue
		}
		clean = 0
		if attempt < settleChecks {
			// A killed process leaves the process table within moments:
			// look again soon, whatever the clock (an injected clock may
			// not move while a test waits for the termination).
			time.Sleep(settleInterval)
			continue
		}
		if ticker == nil {
			ticker = r.clock.NewTicker(r.poll)
		}
		select {
		case <-ticker.C():
		case <-deadline.C():
			return fmt.Errorf("processes of the pod still run %v after SIGKILL", r.killTimeout)
		case <-ctx.Done():
			return ctx.Err()
		case <-r.closing:
			return ErrClosed
		}
	}
}

// cgroupOfProcess returns the cgroup of a container process found by the
// environment scan, when it is one of the runtime's; else "".
func (r *Runtime) cgroupOfProcess(pid int) string {
	if r.cgroups == nil {
		return ""
	}
	dir, err := cgroupOf(strconv.Itoa(pid))
	if err != nil || !strings.HasPrefix(dir, r.cgroups.base+string(filepath.Separator)) {
		return ""
	}
	return dir
}

// killUnrecordedCgroups kills and removes, at Open, the cgroups of pods
// the state directory has no record of (an agent that died between
// creating a pod's cgroup and recording the pod, or records removed by
// hand): no one else would ever stop their processes.
func (r *Runtime) killUnrecordedCgroups() {
	for _, uid := range r.limits.v1Pods() {
		if r.pods[uid] == nil {
			r.limits.killPod(uid)
			_ = r.limits.remove(uid)
		}
	}
	if r.cgroups == nil {
		return
	}
	uids, err := r.cgroups.podCgroups()
	if err != nil {
		r.log.Error(err, "Cannot list the pods' cgroups")
		return
	}
	for _, uid := range uids {
		if r.pods[uid] != nil {
			continue
		}
		dir := r.cgroups.podCgroup(uid)
		if err := r.cgroups.kill(dir); err != nil {
			r.log.Error(err, "Cannot kill the cgroup of an unrecorded pod", "pod", uid)
			continue
		}
		r.log.Info("Killed the cgroup of a pod the state directory has no record of", "pod", uid)
		// Removed once empty: at Close, or by the next run.
		_ = r.cgroups.remove(dir)
	}
}

// removePodCgroup removes the pod's cgroup, which must hold no process.
func (r *Runtime) removePodCgroup(uid types.UID) error {
	if r.cgroups == nil {
		return nil
	}
	return r.cgroups.remove(r.cgroups.podCgroup(uid))
}

// KillProcesses sends SIGKILL to each process of ps that is still the
// process ScanProcesses found (same PID and start time; a reused PID is
// never signalled), and returns how many it signalled. It does not wait
// for them to end. An agent uses it as a last resort on what a scan finds
// of its pods after they stopped; the runtime itself stops every process
// of a pod it stops.
func KillProcesses(ps []Process) int {
	n := 0
	for _, p := range ps {
		if killIfSame(p.PID, p.StartTicks) {
			n++
		}
	}
	return n
}
