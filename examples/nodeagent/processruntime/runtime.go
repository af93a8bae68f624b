package processruntime

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/podnet"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/podworker"
)

// The environment variables every container process gets, after the
// container's own env (so a container cannot override them). Processes the
// container starts inherit them; ScanProcesses finds processes by them.
const (
	EnvPodUID        = "PODKIT_POD_UID"
	EnvPodName       = "PODKIT_POD_NAME"
	EnvPodNamespace  = "PODKIT_POD_NAMESPACE"
	EnvContainerName = "PODKIT_CONTAINER_NAME"
	// EnvRuntimeID names the runtime (its state directory) that started
	// the process; see Runtime.Processes.
	EnvRuntimeID = "PODKIT_RUNTIME_ID"
)

// DefaultPath is the PATH commands are looked up in when neither the
// container's env nor Options.Path sets one.
const DefaultPath = sandbox.DefaultPath

var (
	// ErrBackOff is wrapped by the error SyncPod returns while a container
	// waits out its restart backoff. The error also carries the remaining
	// wait (podworker.RetryAfter), so the engine retries exactly then.
	ErrBackOff = errors.New("processruntime: back-off restarting failed container")
	// ErrClosed is returned by hooks called after Close.
	ErrClosed = errors.New("processruntime: runtime closed")
)

// Options configure a Runtime. Only StateDir is required.
type Options struct {
	// StateDir is where the runtime keeps each pod's process records, logs
	// and scratch directory. Required. It is created if missing; one
	// Runtime at a time may use it (Open locks it).
	StateDir string
	// Path is the PATH commands are looked up in when the container's env
	// sets none; processes get it as their PATH. Defaults to DefaultPath
	// (an image's usual PATH) for the pods in a sandbox, whose users could
	// not search the agent's own directories, and to the agent's own PATH
	// (or DefaultPath when that is empty) for the others.
	Path string
	// BackOff is the delay before the second restart of a container that
	// keeps exiting (the first restart is immediate); each further restart
	// doubles it up to MaxBackOff. A container whose latest exit comes
	// more than 2*MaxBackOff after its backoff last grew starts over.
	// Defaults to 10 seconds, as the kubelet.
	BackOff time.Duration
	// MaxBackOff caps the restart backoff. Defaults to 5 minutes, as the
	// kubelet, or BackOff when that is larger.
	MaxBackOff time.Duration
	// KillTimeout is how long SyncTerminatingPod waits for processes to
	// disappear after SIGKILL before it gives up with an error (it is
	// retried). Defaults to 10 seconds.
	KillTimeout time.Duration
	// PollInterval is how often the runtime looks at the process table
	// when it cannot be told of an exit: for processes adopted from a
	// previous run and for processes a container left behind. Defaults to
	// 50 milliseconds.
	PollInterval time.Duration
	// Cgroups says whether each pod gets a cgroup v2 of its own (see
	// Containment). Defaults to CgroupsAuto: when one can be created.
	Cgroups CgroupMode
	// CgroupParent is the cgroup v2 directory (a path under the cgroup2
	// mount, e.g. /sys/fs/cgroup/podkit.slice) the runtime creates its
	// pods' cgroups under. Defaults to the agent's own cgroup. When set,
	// a directory the runtime cannot use is an error, whatever Cgroups
	// says (but CgroupsOff).
	CgroupParent string
	// Clock is the source of all time and timers (restart backoff, grace
	// periods, polling). Defaults to the real clock.
	Clock clock.WithTicker
	// Logger receives the runtime's logs. Defaults to discarding them.
	Logger logr.Logger
	// ContainerLogMaxSize is the most bytes one log file of a container
	// holds: when the next line would not fit, its log shim starts a new
	// file, as the kubelet's containerLogMaxSize. Defaults to
	// DefaultContainerLogMaxSize (10 MiB); at least MinContainerLogMaxSize.
	ContainerLogMaxSize int64
	// ContainerLogMaxFiles is how many log files a container keeps, its
	// current and previous instances together (older instances' logs are
	// deleted when an instance starts): starting a file beyond it deletes
	// the oldest, so a container's logs never take more than
	// ContainerLogMaxSize*ContainerLogMaxFiles bytes, whatever it writes and
	// however often it restarts. As the kubelet's containerLogMaxFiles.
	// Defaults to DefaultContainerLogMaxFiles (5); at least 2.
	ContainerLogMaxFiles int
	// Sandbox says whether each pod runs in a sandbox of its own (see
	// Sandbox in the package doc). Defaults to SandboxAuto: where the
	// machine allows it.
	Sandbox SandboxMode
	// StageExecutable is the absolute path of the program each sandbox
	// stage and log shim runs: cmd/podkit-stages, built from the same
	// source as the agent, root's and executable by others; Open refuses
	// one CheckStageExecutable refuses (LocateStageExecutable finds one
	// installed beside the agent). Defaults to "": the agent's own
	// executable, run again. The stages are the same
	// either way; a small program's start costs a fraction of the CPU of a
	// large agent's (see Cost of a start in the package doc), and a pod's
	// start runs three (its init, container stage and log shim) besides
	// the runtime's spawner, which runs it too.
	StageExecutable string
	// AllowHostAccess lets pods ask for what reaches the host: privileged
	// containers, hostNetwork, hostPID, hostIPC, hostUsers: true and
	// hostPath volumes. Defaults to false: Runtime.ValidatePod refuses
	// such pods (ReasonHostAccessNotAllowed).
	AllowHostAccess bool
	// Masks are host paths no pod sees (an empty directory or file in
	// their place), beyond the state directory, which is always masked:
	// the agent's kubeconfig, credentials and configuration.
	Masks []string
	// IDBase is the first host user and group ID of the pods' ranges: a
	// sandboxed pod's user namespace maps its IDs 0-65535 onto a range of
	// its own, IDBase+n*65536 for the pod's n. Defaults to DefaultIDBase;
	// at least 65536.
	IDBase uint32
	// IDRanges is how many ranges there are, so how many pods may have a
	// sandbox at once. Defaults to as many as fit below 2^32.
	IDRanges int
	// IDRegistry is the directory where the machine's runtimes record which
	// pod holds which range, so that two runtimes (two agents, the nodes of
	// podkit-cluster) never give one range to two pods. Defaults to
	// DefaultIDRegistry; all the runtimes of a machine must share it.
	IDRegistry string
	// PodPidsLimit bounds the processes of each pod (see Limits in the
	// package doc). Defaults to DefaultPodPidsLimit; negative: no bound.
	PodPidsLimit int64
	// ImageUsers tells which user an image runs as, for containers without
	// runAsUser. Defaults to none: they run as root inside their pod.
	ImageUsers ImageUsers
	// ImageConfigs tells the configuration (entrypoint, cmd, workingDir,
	// env, user) of the images the agent knows, for containers that do not
	// give their own command: an ImageTable, from LoadImageTable for
	// instance. It is asked before the defaults (DefaultImageConfigs),
	// so its entries override them. Defaults to none: the defaults only.
	ImageConfigs ImageConfigs
	// PodCIDR, when set, gives sandboxed pods a network: a network
	// namespace each (owned by the host's user namespace: the pod's root
	// cannot reconfigure it), attached to a bridge of the node's
	// (BridgeName) with an IPv4 address of the range, which the pod's
	// status reports. Defaults to none: each sandbox has a network
	// namespace with only a loopback. See Network in the package doc.
	PodCIDR netip.Prefix
	// BridgeName names the node's bridge. Defaults to podkit0; agents
	// sharing a machine need one each (and disjoint PodCIDRs).
	BridgeName string
	// ClusterDNS are the cluster DNS servers' addresses (at most
	// MaxDNSNameservers): a sandboxed pod with dnsPolicy ClusterFirst
	// resolves through them only. Defaults to none: such a pod resolves as
	// with Default, with a MissingClusterDNS warning, as on a kubelet. See
	// Name resolution in the package doc.
	ClusterDNS []netip.Addr
	// ClusterDomain is the cluster's DNS domain (e.g. cluster.local): the
	// search domains of ClusterFirst pods and the fully qualified names of
	// pods with a subdomain. Defaults to none.
	ClusterDomain string
	// ResolvConf is the host's resolver configuration, which pods with
	// dnsPolicy Default start from. Defaults to DefaultResolvConf.
	ResolvConf string
	// Volumes provides the content of the volumes the runtime does not make
	// itself. Defaults to the volume manager of the per-pod features
	// (UsePodFeatures), else none: such volumes are mounted empty and
	// read-only, and the pod gets a VolumeNotProvided warning.
	Volumes VolumeSource
	// HostIPs are the node's addresses, the primary first: the pods' API
	// status.hostIP and status.hostIPs (PodStatus.HostIPs), what the
	// env's status.hostIP and status.hostIPs read, and the IPs of a pod in
	// the host's network. Defaults to the first global unicast address of
	// the node's interfaces (IPv4 first), else 127.0.0.1. Open refuses an
	// entry that is not an IP address.
	HostIPs []string
	// OnEvent, when set, is called after each container start and exit and
	// when a pod has stopped, like the kubelet's PLEG: an agent uses
	// ContainerExited to sync the pod again soon. It is called from the
	// runtime's goroutines, possibly concurrently, never holding the
	// runtime's locks; it must not block (hand the event to a channel).
	// The events of one container arrive in order, and a pod's PodStopped
	// after the exits of its containers.
	OnEvent func(Event)
}

// Runtime runs each container of a pod as a local OS process. It is a
// podworker.PodSyncer[PodStatus], a podworker.RuntimePodSyncer, and a
// podworker.StatusSource[PodStatus] with podworker.StoppedChecker.
//
// Each container runs command+args (with its image's configuration, see
// ImageConfigs) with the container's env (plus PATH,
// HOSTNAME, HOME and the PODKIT_* variables) in its workingDir (default:
// the pod's scratch directory, shared by its containers and removed when
// the pod is cleaned up — a stand-in for an emptyDir volume), as the
// leader of its own process group, with stdout and stderr drained by a
// log shim into rotated files under LogDir (ReadLogs reads them). The
// image is recorded, never pulled. A container ends when its main process ends: processes it left
// behind in its group are killed then, as a container runtime kills the
// rest of a container when its init process dies. The logs and the
// containers' final states outlive the pod's cleanup as its tombstone
// (SyncTerminatedPod), until PruneTombstones removes them.
//
// Methods are safe for concurrent use. The hooks of one pod UID must not
// run concurrently (the engine guarantees it).
type Runtime struct {
	podsDir string
	// id is the EnvRuntimeID of the processes it starts.
	id          string
	path        string
	bootID      string
	backOff     time.Duration
	maxBackOff  time.Duration
	killTimeout time.Duration
	poll        time.Duration
	clock       clock.WithTicker
	log         logr.Logger
	onEvent     func(Event)
	lock        *os.File
	// cgroups is the pods' cgroup tree; nil when processes are contained
	// by process group and environment only, for noCgroupReason.
	cgroups        *cgroupTree
	noCgroupReason string
	logMaxSize     int64
	logMaxFiles    int
	// stageExe is Options.StageExecutable: "" for the agent's own.
	stageExe string
	// spawner starts the pods' sandboxes (a process of the stages',
	// started with the first sandbox, ended by Close).
	spawner *sandbox.Spawner
	// sandboxes hands out the pods' ID ranges; nil when pods run without
	// a sandbox, for noSandboxReason.
	sandboxes       *idRanges
	noSandboxReason string
	allowHostAccess bool
	// masks are the host paths pods do not see (the state directory's
	// first).
	masks        []string
	imageUsers   ImageUsers
	imageConfigs ImageConfigs
	// pathGiven says Options.Path was set: every pod gets it.
	pathGiven bool
	// multicalls are the node's multi-call programs (ImageConfig.Multicall).
	multicalls   multicalls
	volumeSource VolumeSource
	// features are the per-pod features (UsePodFeatures); nil without.
	features atomic.Pointer[lifecycle.PodFeatures]
	// hostIPs are Options.HostIPs, or their default.
	hostIPs []string
	// volumeRoot is VolumeRoot's directory.
	volumeRoot string
	limits     *limiter
	pidsLimit  int64
	// network is the pod network; nil without Options.PodCIDR.
	network *podnet.Network
	// names makes the pods' /etc/hosts and /etc/resolv.conf.
	names nameResolution

	// closing is closed by Close; watchers of adopted processes then stop.
	// closingCtx ends with it.
	closing       chan struct{}
	closingCtx    context.Context
	closingCancel context.CancelFunc
	closeOnce     sync.Once
	watchers      sync.WaitGroup
	// watchMu orders goWatcher's Add before Close's Wait: once closing
	// is closed, no watcher is added.
	watchMu sync.Mutex

	// mu guards pods and everything reachable from it except proc.mu's
	// fields. It is never held while waiting for a process or calling
	// OnEvent.
	mu   sync.Mutex
	pods map[types.UID]*podState
}

var (
	_ podworker.PodSyncer[PodStatus]      = (*Runtime)(nil)
	_ podworker.RuntimePodSyncer          = (*Runtime)(nil)
	_ podworker.StatusSource[PodStatus]   = (*Runtime)(nil)
	_ podworker.StoppedChecker[PodStatus] = (*Runtime)(nil)
)

// podState is one pod the runtime has state for.
type podState struct {
	uid       types.UID
	namespace string
	name      string
	dir       string
	startedAt time.Time
	// spec is the pod the last SyncPod was given; nil for a pod only
	// recovered from the state directory.
	spec       *v1.Pod
	containers map[string]*container
	// terminating: SyncTerminatingPod began; nothing starts again.
	terminating bool
	// stopped: termination finished.
	stopped  bool
	finalize func(*v1.PodStatus)
	// cleanedUp: SyncTerminatedPod succeeded and only the pod's tombstone
	// (logs and container records) is left. RuntimePods leaves the pod
	// out; PruneTombstones may remove it.
	cleanedUp bool
	// earlier: the tombstone was left by an earlier run and no hook has
	// ended the pod's life in this one, so SyncPod continues from its
	// records (a pod that finished stays finished). Otherwise a SyncPod for
	// a cleaned-up UID is a restart of the UID and starts it clean.
	earlier bool
	// sb is the pod's sandbox (nil: none was started, or the pod runs
	// without one).
	sb *podSandbox
	// limited: the pod's limits were applied to its cgroups (for a pod run
	// without a sandbox, at its first start).
	limited bool
	// warned holds the reasons of the warnings sent for the pod, each
	// sent once.
	warned map[string]bool
	// deadlineExceeded: the pod was active longer than its
	// activeDeadlineSeconds (the per-pod features' deadline said so); it
	// ends Failed, DeadlineExceeded.
	deadlineExceeded bool
}

// container is one container of a pod: its persisted record and, while it
// runs, its process.
type container struct {
	rec   containerRecord
	image string
	// proc is the running process, nil when none runs.
	proc *proc
	// starting is true while SyncPod starts a process for it outside the
	// lock.
	starting bool
	// waiting, when set, is why the container could not be created
	// (CreateContainerConfigError): it is tried again at each SyncPod.
	waiting *reasonMessage
	// built is the environment and the expanded command and args of the
	// container's current start, as the per-pod features built them (nil
	// without: the spec's are used as they are).
	built *builtContainer
}

// proc is one running container process.
type proc struct {
	pid, pgid  int
	startTicks uint64
	// cgroup is the cgroup the process was started in; empty without
	// cgroups.
	cgroup    string
	startedAt time.Time
	id        string
	adopted   bool
	// shim is the log shim of the process's container instance.
	shim *logShim
	// sb is the sandbox the process runs in, and name its name there; nil
	// for a process the runtime started itself.
	sb   *podSandbox
	name string
	// done is closed once the process has ended and its exit is recorded.
	done chan struct{}

	// mu is held while signalling the group and while the process is
	// reaped, so a group is never signalled after its ID may be reused.
	mu     sync.Mutex
	reaped bool
}

// Open opens (creating it if needed) the state directory and returns a
// Runtime over it. Processes recorded there by a previous Runtime that
// still run are adopted: they count as running containers, and each gets a
// goroutine that polls the process table until it ends (or Close). Pods
// found there that no desired pod owns show up in RuntimePods, for the
// agent's housekeeping to kill through SyncTerminatingRuntimePod.
//
// Open fails with a clear error when StateDir is missing or unusable, or
// when another Runtime holds it.
func Open(opts Options) (*Runtime, error) {
	if !supported {
		return nil, errors.New("processruntime: only Linux is supported (the runtime reads /proc)")
	}
	if opts.StateDir == "" {
		return nil, errors.New("processruntime: Options.StateDir is required")
	}
	for _, m := range opts.Masks {
		if !filepath.IsAbs(m) {
			return nil, fmt.Errorf("processruntime: Options.Masks: %q is not an absolute path", m)
		}
	}
	if opts.BackOff < 0 || opts.MaxBackOff < 0 || opts.KillTimeout < 0 || opts.PollInterval < 0 {
		return nil, errors.New("processruntime: durations in Options must not be negative")
	}
	r := &Runtime{
		path:        opts.Path,
		backOff:     opts.BackOff,
		maxBackOff:  opts.MaxBackOff,
		killTimeout: opts.KillTimeout,
		poll:        opts.PollInterval,
		clock:       opts.Clock,
		log:         opts.Logger,
		onEvent:     opts.OnEvent,
		logMaxSize:  opts.ContainerLogMaxSize,
		logMaxFiles: opts.ContainerLogMaxFiles,
		closing:     make(chan struct{}),
		pods:        map[types.UID]*podState{},

		allowHostAccess: opts.AllowHostAccess,
		imageUsers:      opts.ImageUsers,
		imageConfigs:    opts.ImageConfigs,
		pathGiven:       opts.Path != "",
		volumeSource:    opts.Volumes,
		pidsLimit:       opts.PodPidsLimit,
	}
	switch {
	case r.pidsLimit == 0:
		r.pidsLimit = DefaultPodPidsLimit
	case r.pidsLimit < 0:
		r.pidsLimit = 0
	}
	var err error
	if r.names, err = newNameResolution(opts); err != nil {
		return nil, err
	}
	if r.path == "" {
		if r.path = os.Getenv("PATH"); r.path == "" {
			r.path = DefaultPath
		}
	}
	if r.backOff == 0 {
		r.backOff = 10 * time.Second
	}
	if r.maxBackOff == 0 {
		r.maxBackOff = max(5*time.Minute, r.backOff)
	}
	if r.maxBackOff < r.backOff {
		return nil, fmt.Errorf("processruntime: MaxBackOff %v is below BackOff %v", r.maxBackOff, r.backOff)
	}
	if r.killTimeout == 0 {
		r.killTimeout = 10 * time.Second
	}
	if r.poll == 0 {
		r.poll = 50 * time.Millisecond
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.logMaxSize == 0 {
		r.logMaxSize = DefaultContainerLogMaxSize
	}
	if r.logMaxSize < MinContainerLogMaxSize {
		return nil, fmt.Errorf("processruntime: ContainerLogMaxSize %d is below the minimum of %d bytes", r.logMaxSize, MinContainerLogMaxSize)
	}
	if r.logMaxFiles == 0 {
		r.logMaxFiles = DefaultContainerLogMaxFiles
	}
	if r.logMaxFiles < 2 {
		return nil, fmt.Errorf("processruntime: ContainerLogMaxFiles %d is below the minimum of 2", r.logMaxFiles)
	}
	if r.stageExe = opts.StageExecutable; r.stageExe != "" {
		if err := CheckStageExecutable(context.Background(), r.stageExe); err != nil {
			return nil, err
		}
	}
	if r.spawner, err = sandbox.NewSpawner(sandbox.SpawnerOptions{Executable: r.stageExe}); err != nil {
		return nil, fmt.Errorf("processruntime: %w", err)
	}
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("processruntime: state directory %q: %w", opts.StateDir, err)
	}
	r.podsDir = filepath.Join(abs, "pods")
	r.volumeRoot = filepath.Join(abs, "volumes")
	for i, ip := range opts.HostIPs {
		if _, err := netip.ParseAddr(ip); err != nil {
			return nil, fmt.Errorf("processruntime: HostIPs[%d] %q is not an IP address", i, ip)
		}
	}
	if r.hostIPs = append([]string(nil), opts.HostIPs...); len(r.hostIPs) == 0 {
		r.hostIPs = defaultHostIPs()
	}
	r.id = runtimeID(abs)
	if err := os.MkdirAll(r.podsDir, 0o700); err != nil {
		return nil, fmt.Errorf("processruntime: creating the state directory: %w", err)
	}
	if r.lock, err = lockDir(abs); err != nil {
		return nil, err
	}
	if r.bootID, err = bootID(); err != nil {
		r.lock.Close()
		return nil, fmt.Errorf("processruntime: %w", err)
	}
	if err := r.openContainment(abs, opts.Cgroups, opts.CgroupParent); err != nil {
		r.lock.Close()
		return nil, err
	}
	r.masks = append([]string{abs}, opts.Masks...)
	if err := r.openSandboxes(abs, opts); err != nil {
		r.lock.Close()
		return nil, err
	}
	r.limits = openLimiter(abs, r.cgroups, r.pidsLimit, r.sandboxes != nil)
	r.closingCtx, r.closingCancel = context.WithCancel(context.Background())
	r.recoverState()
	if err := r.openNetwork(abs, opts.PodCIDR, opts.BridgeName); err != nil {
		r.closeSandboxConns()
		r.closingCancel()
		r.lock.Close()
		return nil, err
	}
	r.reattachNetworks()
	return r, nil
}

// lockDir takes an exclusive lock on dir/lock, held until the file closes.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("processruntime: locking the state directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("processruntime: state directory %s is in use by another runtime", dir)
		}
		return nil, fmt.Errorf("processruntime: locking the state directory: %w", err)
	}
	return f, nil
}

// Close stops the goroutines that watch adopted processes, removes the
// cgroups that hold no process (waiting up to a second in all for those
// whose processes it killed to empty) and releases the state directory.
// Processes keep running: a later Runtime on the same directory adopts
// them. Hooks called after Close return ErrClosed, and a ReadLogs that
// follows a log ends. The goroutines that wait for each started process
// and log shim end when they do. Close is idempotent.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() {
		r.watchMu.Lock()
		close(r.closing)
		r.watchMu.Unlock()
		r.closingCancel()
		// What waits on a sandbox's connection stops with it; the sandboxes
		// keep running, for a later Runtime to connect to.
		r.closeSandboxConns()
		_ = r.spawner.Close()
		r.watchers.Wait()
		if r.network != nil {
			_ = r.network.Close()
		}
		if r.cgroups != nil {
			r.cgroups.removeEmpty()
		}
		r.limits.removeEmpty()
		// Unlock before closing: a child being forked at this moment holds
		// a copy of the descriptor until it execs, and the lock would
		// outlive Close until then, failing an Open that follows at once.
		_ = syscall.Flock(int(r.lock.Fd()), syscall.LOCK_UN)
		r.lock.Close()
	})
	return nil
}

// goWatcher runs f on a goroutine Close waits for, unless the runtime is
// closing (f is then not run: what it would watch is a later runtime's to
// adopt). It reports whether f runs.
func (r *Runtime) goWatcher(f func()) bool {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	if r.closed() {
		return false
	}
	r.watchers.Go(f)
	return true
}

func (r *Runtime) closed() bool {
	select {
	case <-r.closing:
		return true
	default:
		return false
	}
}

// PodDir returns the directory where the runtime keeps the pod's state
// (it may not exist).
func (r *Runtime) PodDir(uid types.UID) string { return filepath.Join(r.podsDir, string(uid)) }

// RuntimePods lists every pod the runtime has state for, running or not,
// except tombstones (Tombstones lists those), sorted by UID: what an
// agent's housekeeping compares with the pods it knows, killing the others
// with a RunningPod update (which ends in SyncTerminatingRuntimePod). The
// slice is the caller's.
func (r *Runtime) RuntimePods() []podworker.RuntimePod {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]podworker.RuntimePod, 0, len(r.pods))
	for _, p := range r.pods {
		if !p.cleanedUp {
			out = append(out, podworker.RuntimePod{UID: p.uid, Namespace: p.namespace, Name: p.name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}
