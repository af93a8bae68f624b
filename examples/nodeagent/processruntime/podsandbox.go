package processruntime

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// This file is the pods' sandboxes on the runtime's side: choosing one's
// configuration, starting it, watching its init, stopping it, and reading
// it back after an agent restart (see "Sandbox" in the package doc).

// SandboxMode says whether the runtime runs pods in sandboxes.
type SandboxMode int

const (
	// SandboxAuto runs every pod in a sandbox when the machine allows it
	// (sandbox requirements: root, user namespaces, overlayfs, Linux 5.12),
	// and otherwise runs pods without one (Containment says why), refusing
	// those whose securityContext needs it.
	SandboxAuto SandboxMode = iota
	// SandboxOff never uses a sandbox.
	SandboxOff
	// SandboxRequired makes Open fail when sandboxes cannot be built.
	SandboxRequired
)

// String returns "auto", "off" or "required".
func (m SandboxMode) String() string {
	switch m {
	case SandboxAuto:
		return "auto"
	case SandboxOff:
		return "off"
	case SandboxRequired:
		return "required"
	}
	return fmt.Sprintf("SandboxMode(%d)", int(m))
}

// The files of a pod's sandbox, in its directory.
const (
	// sandboxFile records the sandbox: its ID range and its init.
	sandboxFile = "sandbox.json"
	// sandboxDir holds the control socket, the stages' log and the empty
	// directory the spawner mounts the pod's root on (in a mount namespace
	// of its setup's only).
	sandboxDir = "sandbox"
	// volumesDir holds the pod's emptyDir volumes (and empty directories
	// standing for volumes nothing provides).
	volumesDir = "volumes"
)

// sandboxRecord is sandbox.json.
type sandboxRecord struct {
	// Slot is the pod's range of host IDs (idRanges); HostID its first ID,
	// 0 when the pod has no user namespace (privileged, hostUsers).
	Slot   int    `json:"slot"`
	HostID uint32 `json:"hostID"`
	// PID, StartTicks and BootID name the init (PID 0: none runs).
	PID        int    `json:"pid,omitempty"`
	StartTicks uint64 `json:"startTicks,omitempty"`
	BootID     string `json:"bootID,omitempty"`
	// NetNS is false when the pod shares the host's network. Attached:
	// its namespace is the pod network's (Options.PodCIDR), IPs its
	// addresses there.
	NetNS    bool     `json:"netns,omitempty"`
	Attached bool     `json:"attached,omitempty"`
	IPs      []string `json:"ips,omitempty"`
}

// podSandbox is a pod's sandbox while its init runs.
type podSandbox struct {
	rec  sandboxRecord
	conn *sandbox.Conn
	// gone is closed once the init has ended.
	gone chan struct{}
}

// ended reports whether the sandbox's init has ended.
func (sb *podSandbox) ended() bool {
	select {
	case <-sb.gone:
		return true
	default:
		return false
	}
}

// openSandboxes decides at Open whether pods run in sandboxes.
func (r *Runtime) openSandboxes(stateDir string, opts Options) error {
	if opts.Sandbox == SandboxOff {
		r.noSandboxReason = "sandboxes are turned off"
		return nil
	}
	if opts.Sandbox != SandboxAuto && opts.Sandbox != SandboxRequired {
		return fmt.Errorf("processruntime: unknown Options.Sandbox %v", opts.Sandbox)
	}
	if err := sandbox.Available(opts.StageExecutable); err != nil {
		if opts.Sandbox == SandboxRequired {
			return fmt.Errorf("processruntime: no sandbox for the pods: %w", err)
		}
		r.noSandboxReason = err.Error()
		r.log.Info("Pods run without a sandbox: in the host's namespaces, as the agent's user", "reason", err.Error())
		return nil
	}
	ids, err := newIDRanges(opts.IDBase, opts.IDRanges, opts.IDRegistry, stateDir)
	if err != nil {
		return err
	}
	r.sandboxes = ids
	return nil
}

// ensureSandbox starts the pod's sandbox unless one runs. It is called
// by SyncPod before it starts a container.
func (r *Runtime) ensureSandbox(ctx context.Context, p *podState, pod *v1.Pod) error {
	r.mu.Lock()
	sb := p.sb
	r.mu.Unlock()
	if sb != nil && !sb.ended() {
		return nil
	}
	t0 := time.Now()
	nsb, err := r.startSandbox(ctx, p, pod)
	traceStage("podsandbox", t0)
	if err != nil {
		r.emitWarning(p, "", reasonMessage{ReasonFailedCreatePodSandBox, "Failed to create pod sandbox: " + err.Error()})
		return fmt.Errorf("processruntime: pod %s: creating its sandbox: %w", podName(pod), err)
	}
	r.mu.Lock()
	p.sb = nsb
	r.mu.Unlock()
	return nil
}

// ReasonFailedCreatePodSandBox is the reason of the warning a pod gets
// when its sandbox cannot be made, as the kubelet names it.
const ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"

// startSandbox starts a sandbox for the pod, with the pod's ID range,
// and records it.
func (r *Runtime) startSandbox(ctx context.Context, p *podState, pod *v1.Pod) (*podSandbox, error) {
	// The range stays the pod's, whatever happens here, until its cleanup
	// (releaseSandboxLocked): its volumes' files may be its IDs already
	// (MapIDs), and a sandbox started again gets the same.
	slot, err := r.sandboxes.allocate(p.uid)
	if err != nil {
		return nil, err
	}
	rec := sandboxRecord{Slot: slot, NetNS: !pod.Spec.HostNetwork}
	if !noUserNamespace(pod) {
		rec.HostID = r.sandboxes.hostID(slot)
	}
	dir := filepath.Join(p.dir, sandboxDir)
	stage := filepath.Join(dir, "stage")
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return nil, err
	}
	cfg, warnings, err := r.sandboxConfig(p, pod, rec.HostID, stage)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		r.emitWarning(p, "", w)
	}
	log, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	lim := limitsOf(pod, r.pidsLimit)
	if err := r.limits.apply(p.uid, lim); err != nil {
		return nil, err
	}
	if r.limits.rlimit {
		cfg.MaxProcs = uint64(lim.pids)
	}
	var netns *os.File
	var ips []netip.Addr
	if !pod.Spec.HostNetwork {
		t0 := time.Now()
		netns, ips, err = r.attachNetwork(ctx, p.uid)
		traceStage("network", t0)
		if err != nil {
			return nil, fmt.Errorf("attaching the pod to the network: %w", err)
		}
		if netns != nil {
			defer netns.Close()
			cfg.JoinNetNS, rec.Attached, rec.IPs = true, true, addrStrings(ips)
		}
	}
	names, warnings, err := r.nameFiles(p, pod, rec.HostID, ips)
	if err != nil {
		return nil, fmt.Errorf("writing the pod's /etc/hosts and /etc/resolv.conf: %w", err)
	}
	for _, w := range warnings {
		r.emitWarning(p, "", w)
	}
	cfg.Binds = append(cfg.Binds, names...)
	socket := filepath.Join(dir, "init.sock")
	join, leave := r.limits.threadTasks(p.uid)
	launch := sandbox.Launch{
		NetNS:  netns,
		Socket: socket,
		Log:    log,
		// The init is born in the pod's cgroups (a new leaf of the v2
		// tree, the pod's v1 ones), so the whole pod is inside.
		JoinTasks:  join,
		LeaveTasks: leave,
		// Found with the pod's processes by a scan of the process table
		// (ScanProcesses), as none of its containers'.
		Env: []string{EnvPodUID + "=" + string(p.uid), EnvPodName + "=" + p.name, EnvPodNamespace + "=" + p.namespace, EnvRuntimeID + "=" + r.id},
	}
	if r.cgroups != nil {
		if launch.Cgroup, err = r.cgroups.newLeafCgroup(p.uid, sandboxCgroupPrefix); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	pid, err := r.spawner.Start(ctx, cfg, launch)
	if err != nil && launch.Cgroup != "" {
		_ = syscall.Rmdir(launch.Cgroup)
	}
	traceStage("sandbox", t0)
	if err != nil {
		return nil, err
	}
	st, err := readStat(pid)
	if err != nil {
		killChild(pid)
		return nil, fmt.Errorf("reading the init's start time: %w", err)
	}
	rec.PID, rec.StartTicks, rec.BootID = pid, st.startTicks, r.bootID
	if err := writeJSON(filepath.Join(p.dir, sandboxFile), rec); err != nil {
		killChild(pid)
		return nil, fmt.Errorf("recording the sandbox: %w", err)
	}
	conn, err := sandbox.Dial(socket)
	if err != nil {
		killChild(pid)
		return nil, err
	}
	sb := &podSandbox{rec: rec, conn: conn, gone: make(chan struct{})}
	go r.reapInit(p, sb)
	r.log.V(2).Info("Pod sandbox started", "pod", podName(pod), "init", pid, "hostID", rec.HostID)
	return sb, nil
}

// noUserNamespace reports whether the pod runs with the host's user IDs:
// a privileged container or hostUsers: true (both allowed only with
// AllowHostAccess).
func noUserNamespace(pod *v1.Pod) bool {
	if pod.Spec.HostUsers != nil && *pod.Spec.HostUsers {
		return true
	}
	for _, c := range allContainers(pod) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return true
		}
	}
	return false
}

// reapInit waits for the sandbox's init, the runtime's child, to end and
// reaps it.
func (r *Runtime) reapInit(p *podState, sb *podSandbox) {
	awaitExit(sb.rec.PID) // holds no thread for the pod's life
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(sb.rec.PID, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	r.sandboxEnded(p, sb)
}

// watchInit polls the process table until an adopted init (started by an
// earlier run, so not this runtime's child) has ended, or Close.
func (r *Runtime) watchInit(p *podState, sb *podSandbox) {
	defer r.watchers.Done()
	t := r.clock.NewTicker(r.poll)
	defer t.Stop()
	for sameProcess(sb.rec.PID, sb.rec.StartTicks) {
		select {
		case <-t.C():
		case <-r.closing:
			return
		}
	}
	r.sandboxEnded(p, sb)
}

// sandboxEnded records that the sandbox's init has ended: with it every
// process in its PID namespace did, and what waits for their exits is
// told so (ErrGone).
func (r *Runtime) sandboxEnded(p *podState, sb *podSandbox) {
	close(sb.gone)
	if sb.conn != nil {
		sb.conn.Close()
	}
	r.log.V(2).Info("Pod sandbox ended", "pod", p.uid, "init", sb.rec.PID)
}

// killSandbox sends SIGKILL to the sandbox's init, if it is still that
// process: the kernel then kills every process of the pod's PID
// namespace.
func (r *Runtime) killSandbox(sb *podSandbox) {
	if sb.conn != nil {
		sb.conn.Close()
	}
	killIfSame(sb.rec.PID, sb.rec.StartTicks)
}

// stopSandbox kills the pod's sandbox and waits (up to KillTimeout) for
// its init to end; the last step of stopping a pod, once its containers
// have.
func (r *Runtime) stopSandbox(p *podState) error {
	r.mu.Lock()
	sb := p.sb
	r.mu.Unlock()
	if sb == nil || sb.ended() {
		return nil
	}
	r.killSandbox(sb)
	deadline := r.clock.NewTimer(r.killTimeout)
	defer deadline.Stop()
	// SIGKILL was sent: a cancelled ctx has nothing left to hurry.
	select {
	case <-sb.gone:
		return nil
	case <-deadline.C():
		return fmt.Errorf("the sandbox's init %d still runs %v after SIGKILL", sb.rec.PID, r.killTimeout)
	case <-r.closing:
		return ErrClosed
	}
}

// releaseSandboxLocked forgets the pod's ended sandbox at its cleanup:
// its ID range is free again, its record and directories go.
func (r *Runtime) releaseSandboxLocked(p *podState) error {
	if p.sb != nil && !p.sb.ended() {
		return fmt.Errorf("processruntime: the sandbox of pod %s/%s still runs", p.namespace, p.name)
	}
	if rec, ok := readSandboxRecord(p.dir); ok {
		if rec.Attached {
			if err := r.detachNetwork(p.uid); err != nil {
				return err
			}
		}
	}
	if r.sandboxes != nil {
		r.sandboxes.releaseUID(p.uid)
	}
	p.sb = nil
	for _, f := range []string{sandboxFile, sandboxDir, volumesDir} {
		if err := os.RemoveAll(filepath.Join(p.dir, f)); err != nil {
			return fmt.Errorf("processruntime: removing the sandbox of pod %s/%s: %w", p.namespace, p.name, err)
		}
	}
	return nil
}

func readSandboxRecord(podDir string) (sandboxRecord, bool) {
	var rec sandboxRecord
	if err := readJSON(filepath.Join(podDir, sandboxFile), &rec); err != nil {
		return sandboxRecord{}, false
	}
	return rec, true
}

// NetNS returns the path of the network namespace of the pod's sandbox
// (the pod network's, or /proc/<init>/ns/net), for what must enter it
// (setns); "" when the pod has no sandbox running or shares the host's
// network.
func (r *Runtime) NetNS(uid types.UID) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[uid]
	switch {
	case p == nil || p.sb == nil || p.sb.ended() || !p.sb.rec.NetNS:
		return ""
	case p.sb.rec.Attached && r.network != nil:
		return r.network.NetnsPath(uid)
	}
	return fmt.Sprintf("/proc/%d/ns/net", p.sb.rec.PID)
}

// closeSandboxConns closes the connections to the sandboxes' inits.
func (r *Runtime) closeSandboxConns() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pods {
		if p.sb != nil && p.sb.conn != nil {
			p.sb.conn.Close()
		}
	}
}

// podHostname is the pod's hostname as the kubelet makes it: spec.hostname
// or the pod's name, at most 63 characters, without a trailing '-' or '.'.
func podHostname(pod *v1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// errSandboxEnded is the exit message of a container whose sandbox ended
// under it.
var errSandboxEnded = errors.New("the pod's sandbox ended")

// sandboxWait bounds a call to a sandbox's init that should answer at
// once.
const sandboxWait = 30 * time.Second

// MapIDs maps the user and group IDs uid and gid of pod (inside it) to the
// host's: for a sandboxed pod with a user namespace, into the pod's range
// of host IDs (taken at the first call, and the pod's until its cleanup);
// else they are the host's already. It is the IDMapper a volume manager
// needs (lifecycle/volume) so the pod's volume files belong to the pod's
// own IDs. Safe for concurrent use; it may be called before the pod's
// first SyncPod. The error says the IDs are outside the pod's range, or
// that no range is free.
func (r *Runtime) MapIDs(pod *v1.Pod, uid, gid int) (hostUID, hostGID int, err error) {
	if r.sandboxes == nil || noUserNamespace(pod) {
		return uid, gid, nil
	}
	if uid < 0 || gid < 0 || uid >= sandbox.IDsPerPod || gid >= sandbox.IDsPerPod {
		return 0, 0, fmt.Errorf("processruntime: IDs %d:%d are outside the pod's user namespace (0-%d)", uid, gid, sandbox.IDsPerPod-1)
	}
	slot, err := r.sandboxes.allocate(pod.UID)
	if err != nil {
		return 0, 0, fmt.Errorf("processruntime: pod %s: %w", podName(pod), err)
	}
	base := int(r.sandboxes.hostID(slot))
	return base + uid, base + gid, nil
}
