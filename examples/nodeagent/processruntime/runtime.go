package processruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

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
)

// DefaultPath is the PATH commands are looked up in when neither the
// container's env nor Options.Path sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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
	// sets none; processes get it as their PATH. Defaults to the agent's
	// own PATH, or DefaultPath when that is empty.
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
	// Clock is the source of all time and timers (restart backoff, grace
	// periods, polling). Defaults to the real clock.
	Clock clock.WithTicker
	// Logger receives the runtime's logs. Defaults to discarding them.
	Logger logr.Logger
	// OnEvent, when set, is called after each container start and exit and
	// when a pod has stopped, like the kubelet's PLEG: an agent uses
	// ContainerExited to sync the pod again soon. It is called from the
	// runtime's goroutines, possibly concurrently, never holding the
	// runtime's locks; it must not block (hand the event to a channel).
	// The events of one container arrive in order, and a pod's PodStopped
	// after the exits of its containers.
	OnEvent func(Event)
}

// EventType is what happened in an Event.
type EventType int

const (
	// ContainerStarted: a container's process was started.
	ContainerStarted EventType = iota + 1
	// ContainerExited: a container's process ended (or failed to start).
	ContainerExited
	// PodStopped: termination finished; no process of the pod runs. Its
	// Status is the pod's final status.
	PodStopped
)

// String returns "ContainerStarted", "ContainerExited" or "PodStopped".
func (t EventType) String() string {
	switch t {
	case ContainerStarted:
		return "ContainerStarted"
	case ContainerExited:
		return "ContainerExited"
	case PodStopped:
		return "PodStopped"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is a change the runtime observed in a pod.
type Event struct {
	// Type is what happened.
	Type EventType
	// UID, Namespace and Name identify the pod.
	UID       types.UID
	Namespace string
	Name      string
	// Container is the container's name; empty for PodStopped.
	Container string
	// Status is the pod's status just after the change (the caller's).
	Status PodStatus
}

// Runtime runs each container of a pod as a local OS process. It is a
// podworker.PodSyncer[PodStatus], a podworker.RuntimePodSyncer, and a
// podworker.StatusSource[PodStatus] with podworker.StoppedChecker.
//
// Each container runs command+args with the container's env (plus PATH,
// HOSTNAME, HOME and the PODKIT_* variables) in its workingDir (default:
// the pod's scratch directory, shared by its containers and removed when
// the pod is cleaned up — a stand-in for an emptyDir volume), as the
// leader of its own process group, with stdout and stderr appended to
// <StateDir>/pods/<uid>/logs/<container>.log. The image is recorded, never
// pulled. A container ends when its main process ends: processes it left
// behind in its group are killed then, as a container runtime kills the
// rest of a container when its init process dies. The logs and the
// containers' final states outlive the pod's cleanup as its tombstone
// (SyncTerminatedPod), until PruneTombstones removes them.
//
// Methods are safe for concurrent use. The hooks of one pod UID must not
// run concurrently (the engine guarantees it).
type Runtime struct {
	podsDir     string
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

	// closing is closed by Close; watchers of adopted processes then stop.
	closing   chan struct{}
	closeOnce sync.Once
	watchers  sync.WaitGroup

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
}

// proc is one running container process.
type proc struct {
	pid, pgid  int
	startTicks uint64
	startedAt  time.Time
	id         string
	adopted    bool
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
		closing:     make(chan struct{}),
		pods:        map[types.UID]*podState{},
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
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("processruntime: state directory %q: %w", opts.StateDir, err)
	}
	r.podsDir = filepath.Join(abs, "pods")
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
	r.recoverState()
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

// recoverState loads the state directory: adopts live processes, records the
// others as exited with an unknown code, kills what dead containers left
// behind, and reads tombstones back.
func (r *Runtime) recoverState() {
	loaded, errs := loadState(r.podsDir)
	for _, err := range errs {
		r.log.Error(err, "Damaged state; its pod is kept for housekeeping to remove")
	}
	now := r.clock.Now()
	var scanned []Process
	scanOnce := sync.OnceValue(func() error {
		var err error
		scanned, err = ScanProcesses(nil)
		return err
	})
	for _, lp := range loaded {
		p := &podState{uid: lp.pod.UID, namespace: lp.pod.Namespace, name: lp.pod.Name, dir: lp.dir, startedAt: lp.pod.StartedAt, containers: map[string]*container{}}
		r.pods[p.uid] = p
		for _, rec := range lp.containers {
			c := &container{rec: rec}
			p.containers[rec.Name] = c
			if rec.Starting {
				// The agent died while starting this container: find its
				// process, if it started, by its environment.
				c.rec.Starting = false
				if err := scanOnce(); err != nil {
					r.log.Error(err, "Cannot scan for a container started by a previous run", "pod", p.uid, "container", rec.Name)
				}
				for _, sp := range scanned {
					if sp.Leader && sp.PodUID == string(p.uid) && sp.Container == rec.Name {
						c.rec.PID, c.rec.PGID, c.rec.StartTicks, c.rec.BootID, c.rec.StartedAt = sp.PID, sp.PGID, sp.StartTicks, r.bootID, now
					}
				}
			}
			if c.rec.PID == 0 {
				continue
			}
			if c.rec.BootID == r.bootID && sameProcess(c.rec.PID, c.rec.StartTicks) {
				pr := &proc{pid: c.rec.PID, pgid: c.rec.PGID, startTicks: c.rec.StartTicks, startedAt: c.rec.StartedAt, adopted: true, done: make(chan struct{})}
				pr.id = containerID(pr.pid, pr.startTicks)
				c.proc = pr
				r.log.Info("Adopted a container process from a previous run", "pod", p.uid, "container", rec.Name, "pid", pr.pid)
				r.watchers.Add(1)
				go r.watchAdopted(p, c, pr)
				continue
			}
			// The process is gone: its exit code is lost.
			if c.rec.BootID == r.bootID {
				r.killLeftovers(c.rec.PGID, c.rec.StartTicks)
			}
			c.rec.LastExit = c.rec.Exit
			c.rec.Exit = &ExitStatus{Code: 137, Reason: ReasonStatusUnknown, Message: "the process ended while the agent was not running", StartedAt: c.rec.StartedAt, FinishedAt: now, ID: containerID(c.rec.PID, c.rec.StartTicks)}
			c.rec.PID, c.rec.PGID, c.rec.StartTicks = 0, 0, 0
			r.persistLocked(p, c)
		}
		if lp.pod.CleanedUp {
			if procs := p.procsLocked(); len(procs) > 0 {
				// Cannot happen unless the directory was tampered with: treat
				// it as a live pod, so housekeeping kills it if unwanted.
				r.log.Info("A cleaned-up pod has running processes; it is treated as a running pod", "pod", p.uid, "processes", len(procs))
				continue
			}
			p.cleanedUp, p.stopped, p.earlier = true, true, true
		}
	}
}

// killLeftovers SIGKILLs what remains of the group led by the process
// (pgid, leaderStart), if anything.
func (r *Runtime) killLeftovers(pgid int, leaderStart uint64) {
	if pgid <= 1 {
		return
	}
	members, err := groupMembers(pgid, leaderStart)
	if err != nil {
		r.log.Error(err, "Cannot look for processes left behind", "pgid", pgid)
		return
	}
	if len(members) > 0 {
		if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
			r.log.Error(err, "Cannot kill processes left behind", "pgid", pgid, "pids", members)
		}
	}
}

// Close stops the goroutines that watch adopted processes and releases the
// state directory. Processes keep running: a later Runtime on the same
// directory adopts them. Hooks called after Close return ErrClosed. The
// goroutine that waits for each started process ends when the process
// does. Close is idempotent.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() {
		close(r.closing)
		r.watchers.Wait()
		// Unlock before closing: a child being forked at this moment holds
		// a copy of the descriptor until it execs, and the lock would
		// outlive Close until then, failing an Open that follows at once.
		_ = syscall.Flock(int(r.lock.Fd()), syscall.LOCK_UN)
		r.lock.Close()
	})
	return nil
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

// LogPath returns the log file of a container of the pod.
func (r *Runtime) LogPath(uid types.UID, containerName string) string {
	return filepath.Join(r.PodDir(uid), logsDir, containerName+".log")
}

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

// PodStatus returns a snapshot of the pod. The runtime's view is always
// current, so newerThan is met at once and PodStatus never blocks. A
// tombstone yields the pod's final status (Stopped, each container's last
// exit). A pod the runtime has no state for yields the zero status with
// UID and Time set, and no error.
func (r *Runtime) PodStatus(_ context.Context, uid types.UID, _ time.Time) (PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pods[uid]; p != nil {
		return r.snapshotLocked(p), nil
	}
	return PodStatus{UID: uid, Time: r.clock.Now()}, nil
}

// NothingRunning reports whether status shows no running container.
func (r *Runtime) NothingRunning(status PodStatus) bool { return !status.Running() }

// SyncPod brings the pod's processes in line with its spec and returns at
// once; it never waits for a container to run or end. Init containers run
// first, one at a time in order, each until it succeeds; then every regular
// container is started. An exited container is restarted as restartPolicy
// says (Always: always; OnFailure: after a non-zero exit; Never: never;
// a failed init container is retried unless Never): the first restart at
// once, later ones after an exponential backoff, during which SyncPod
// returns an error wrapping ErrBackOff that tells the engine when to
// retry. Running containers are left alone, so SyncPod is idempotent.
//
// It returns terminal true when the pod is done by its restart policy: an
// init container failed under Never, or every regular container exited and
// none is to be restarted.
//
// A UID cleaned up by SyncTerminatedPod in this run starts clean: the
// engine only syncs it again to restart it. A tombstone an earlier run left
// (the agent restarted) is instead continued from: its containers' exits
// are judged by the restart policy as if they had just happened, so a pod
// that finished is reported terminal at once and nothing starts, while a
// container due for a restart (Always, or OnFailure after a failure) is
// started again, its restart count going on.
//
// A command that cannot be found or started is recorded as an exit with
// code 128 and ReasonStartError, and then follows the restart policy like
// any exit. An error wrapping ErrUnsupported means the pod cannot run here
// (see ValidatePod). status is not used: the runtime reads its own state.
func (r *Runtime) SyncPod(ctx context.Context, _ podworker.UpdateType, pod, _ *v1.Pod, _ PodStatus) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if r.closed() {
		return false, ErrClosed
	}
	if err := ValidatePod(pod); err != nil {
		return false, err
	}
	p, terminal, err := r.ensurePod(pod)
	if err != nil || terminal {
		return terminal, err
	}
	startedNow := map[*container]bool{}
	for {
		r.mu.Lock()
		if p.terminating {
			r.mu.Unlock()
			return false, fmt.Errorf("processruntime: SyncPod for pod %s after its termination began; the UID must be cleaned up (SyncTerminatedPod) before it starts again", podName(pod))
		}
		p.spec = pod
		pl := r.planLocked(p, pod, r.clock.Now())
		var todo []*container
		for _, c := range pl.start {
			if !startedNow[c] {
				c.starting = true
				todo = append(todo, c)
			}
		}
		r.mu.Unlock()

		if len(todo) == 0 {
			switch {
			case pl.terminal:
				return true, nil
			case pl.wait > 0:
				return false, podworker.RetryAfter(fmt.Errorf("%w: container %q of pod %s may restart in %v", ErrBackOff, pl.waitFor, podName(pod), pl.wait.Round(time.Millisecond)), pl.wait)
			}
			return false, nil
		}
		for i, c := range todo {
			if err := ctx.Err(); err != nil {
				r.mu.Lock()
				for _, rest := range todo[i:] {
					rest.starting = false
				}
				r.mu.Unlock()
				return false, err
			}
			startedNow[c] = true
			r.start(p, pod, c)
		}
	}
}

// plan is what SyncPod should do next for a pod.
type plan struct {
	start    []*container
	terminal bool
	// wait is the shortest remaining restart backoff, for container waitFor.
	wait    time.Duration
	waitFor string
}

// planLocked decides, from the pod's containers, which to start now.
func (r *Runtime) planLocked(p *podState, pod *v1.Pod, now time.Time) plan {
	policy := pod.Spec.RestartPolicy
	get := func(spec *v1.Container, init bool) *container {
		c := p.containers[spec.Name]
		if c == nil {
			c = &container{rec: containerRecord{Name: spec.Name, Init: init}}
			p.containers[spec.Name] = c
		}
		c.image = spec.Image
		return c
	}
	var pl plan
	backoff := func(c *container) {
		if w := r.restartWaitLocked(c, now); w > 0 {
			if pl.wait == 0 || w < pl.wait {
				pl.wait, pl.waitFor = w, c.rec.Name
			}
			return
		}
		pl.start = append(pl.start, c)
	}
	for i := range pod.Spec.InitContainers {
		c := get(&pod.Spec.InitContainers[i], true)
		switch {
		case c.proc != nil || c.starting:
			return pl
		case c.rec.Exit == nil:
			pl.start = append(pl.start, c)
			return pl
		case c.rec.Exit.Code == 0:
			continue
		case !shouldRestart(policy, c.rec.Exit.Code, true):
			pl.terminal = true
			return pl
		default:
			backoff(c)
			return pl
		}
	}
	done := true
	for i := range pod.Spec.Containers {
		c := get(&pod.Spec.Containers[i], false)
		switch {
		case c.proc != nil || c.starting:
			done = false
		case c.rec.Exit == nil:
			done = false
			pl.start = append(pl.start, c)
		case shouldRestart(policy, c.rec.Exit.Code, false):
			done = false
			backoff(c)
		}
	}
	pl.terminal = done
	return pl
}

// restartWaitLocked is how long the exited container c must still wait
// before it may start again. The kubelet's rule: the first restart is
// immediate; then each restart waits the current backoff after the exit,
// and the backoff doubles at each restart; a backoff that last grew more
// than 2*MaxBackOff before the exit has expired.
func (r *Runtime) restartWaitLocked(c *container, now time.Time) time.Duration {
	e := c.rec.Exit
	if e == nil || c.rec.BackOff == 0 || r.backOffExpired(c) {
		return 0
	}
	return max(e.FinishedAt.Add(c.rec.BackOff).Sub(now), 0)
}

func (r *Runtime) backOffExpired(c *container) bool {
	return c.rec.Exit != nil && c.rec.Exit.FinishedAt.Sub(c.rec.BackOffSetAt) > 2*r.maxBackOff
}

// advanceBackOffLocked grows c's backoff as it restarts at now.
func (r *Runtime) advanceBackOffLocked(c *container, now time.Time) {
	if c.rec.BackOff == 0 || r.backOffExpired(c) {
		c.rec.BackOff = r.backOff
	} else {
		c.rec.BackOff = min(2*c.rec.BackOff, r.maxBackOff)
	}
	c.rec.BackOffSetAt = now
}

// ensurePod returns the pod's state, creating its directories and identity
// file on first use. For a tombstone it either reports the pod terminal
// (an earlier run's pod that finished), brings the pod back to life (an
// earlier run's pod with a container to restart), or discards it and
// starts the UID clean (a pod cleaned up in this run, now restarted).
func (r *Runtime) ensurePod(pod *v1.Pod) (p *podState, terminal bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p = r.pods[pod.UID]
	if p != nil && p.cleanedUp {
		if !p.earlier {
			if err := os.RemoveAll(p.dir); err != nil {
				return nil, false, fmt.Errorf("processruntime: removing the tombstone of pod %s before it restarts: %w", podName(pod), err)
			}
			delete(r.pods, pod.UID)
			p = nil
		} else {
			p.spec = pod
			if r.planLocked(p, pod, r.clock.Now()).terminal {
				return p, true, nil
			}
			if err := r.reviveLocked(p, pod); err != nil {
				return nil, false, err
			}
		}
	}
	if p != nil {
		if p.name == "" {
			p.namespace, p.name = pod.Namespace, pod.Name
			r.writePodRecordLocked(p)
		}
		return p, false, nil
	}
	p = &podState{uid: pod.UID, namespace: pod.Namespace, name: pod.Name, dir: r.PodDir(pod.UID), startedAt: r.clock.Now(), containers: map[string]*container{}}
	if err := makePodDirs(p.dir); err != nil {
		return nil, false, fmt.Errorf("processruntime: creating the directory of pod %s: %w", podName(pod), err)
	}
	if err := r.writePodRecordLocked(p); err != nil {
		return nil, false, err
	}
	r.pods[pod.UID] = p
	return p, false, nil
}

// makePodDirs creates a pod directory's subdirectories.
func makePodDirs(dir string) error {
	for _, d := range []string{containersDir, logsDir, scratchDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// reviveLocked turns an earlier run's tombstone back into a live pod whose
// containers are about to restart: its scratch directory is made again
// (empty) and pod.json no longer says cleaned up.
func (r *Runtime) reviveLocked(p *podState, pod *v1.Pod) error {
	if err := makePodDirs(p.dir); err != nil {
		return fmt.Errorf("processruntime: restoring the directory of pod %s: %w", podName(pod), err)
	}
	p.cleanedUp = false
	if err := r.writePodRecordLocked(p); err != nil {
		p.cleanedUp = true
		return err
	}
	p.stopped, p.earlier, p.finalize = false, false, nil
	r.log.Info("Restarting a pod an earlier run had cleaned up, as its restart policy says", "pod", podName(pod), "podUID", p.uid)
	return nil
}

func (r *Runtime) writePodRecordLocked(p *podState) error {
	rec := podRecord{UID: p.uid, Namespace: p.namespace, Name: p.name, StartedAt: p.startedAt, CleanedUp: p.cleanedUp}
	if err := writeJSON(filepath.Join(p.dir, podFile), rec); err != nil {
		return fmt.Errorf("processruntime: recording pod %s/%s: %w", p.namespace, p.name, err)
	}
	return nil
}

// persistLocked writes c's record. A failure is logged: the process runs
// either way, and the next change writes the record again.
func (r *Runtime) persistLocked(p *podState, c *container) {
	if err := writeJSON(filepath.Join(p.dir, containersDir, c.rec.Name+".json"), &c.rec); err != nil {
		r.log.Error(err, "Cannot record a container's process", "pod", p.uid, "container", c.rec.Name)
	}
}

// start starts c's process (c.starting is set) and records the outcome.
func (r *Runtime) start(p *podState, pod *v1.Pod, c *container) {
	spec := findContainer(pod, c.rec.Name)
	now := r.clock.Now()

	r.mu.Lock()
	if c.rec.Exit != nil {
		// A restart.
		r.advanceBackOffLocked(c, now)
		c.rec.Restarts++
		c.rec.LastExit, c.rec.Exit = c.rec.Exit, nil
	}
	c.rec.Starting = true
	r.persistLocked(p, c)
	r.mu.Unlock()

	pr, cmd, logf, err := r.startProcess(p, pod, spec)

	r.mu.Lock()
	c.starting = false
	c.rec.Starting = false
	if err != nil {
		end := r.clock.Now()
		c.rec.Exit = &ExitStatus{Code: 128, Reason: ReasonStartError, Message: err.Error(), FinishedAt: end}
		r.persistLocked(p, c)
		ev := r.eventLocked(ContainerExited, p, c.rec.Name)
		r.mu.Unlock()
		r.log.Info("Container failed to start", "pod", podName(pod), "container", c.rec.Name, "err", err.Error())
		r.emit(ev)
		return
	}
	c.proc = pr
	c.rec.PID, c.rec.PGID, c.rec.StartTicks, c.rec.BootID, c.rec.StartedAt = pr.pid, pr.pgid, pr.startTicks, r.bootID, pr.startedAt
	r.persistLocked(p, c)
	ev := r.eventLocked(ContainerStarted, p, c.rec.Name)
	r.mu.Unlock()
	r.log.V(2).Info("Container started", "pod", podName(pod), "container", c.rec.Name, "pid", pr.pid)

	go r.reap(p, c, pr, cmd, logf)
	r.emit(ev)
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func containerID(pid int, startTicks uint64) string {
	return fmt.Sprintf("process://%d.%d", pid, startTicks)
}

// eventLocked builds an event with the pod's current status.
func (r *Runtime) eventLocked(t EventType, p *podState, containerName string) Event {
	return Event{Type: t, UID: p.uid, Namespace: p.namespace, Name: p.name, Container: containerName, Status: r.snapshotLocked(p)}
}

func (r *Runtime) emit(ev Event) {
	if r.onEvent != nil {
		r.onEvent(ev)
	}
}

// reap waits for the process to exit, kills what it left in its group
// while its PID is still reserved, reaps it and records the exit.
func (r *Runtime) reap(p *podState, c *container, pr *proc, cmd *exec.Cmd, logf *os.File) {
	werr := waitExitedNoReap(pr.pid)
	pr.mu.Lock()
	if werr == nil {
		// The leader is a zombie, so its group ID cannot be reused yet.
		if err := signalGroup(pr.pgid, syscall.SIGKILL); err != nil {
			r.log.Error(err, "Cannot kill processes a container left behind", "pod", p.uid, "container", c.rec.Name)
		}
	}
	exit := exitStatus(cmd.Wait(), cmd.ProcessState)
	pr.reaped = true
	pr.mu.Unlock()
	logf.Close()
	exit.StartedAt, exit.FinishedAt, exit.ID = pr.startedAt, r.clock.Now(), pr.id
	r.exited(p, c, pr, exit)
}

// watchAdopted polls the process table until the adopted process ends.
func (r *Runtime) watchAdopted(p *podState, c *container, pr *proc) {
	defer r.watchers.Done()
	t := r.clock.NewTicker(r.poll)
	defer t.Stop()
	for sameProcess(pr.pid, pr.startTicks) {
		select {
		case <-t.C():
		case <-r.closing:
			return
		}
	}
	pr.mu.Lock()
	r.killLeftovers(pr.pgid, pr.startTicks)
	pr.reaped = true
	pr.mu.Unlock()
	r.exited(p, c, pr, ExitStatus{
		Code:      137,
		Reason:    ReasonStatusUnknown,
		Message:   "the process was adopted from a previous run of the agent, so its exit code is unknown",
		StartedAt: pr.startedAt, FinishedAt: r.clock.Now(), ID: pr.id,
	})
}

// exited records the end of pr, then announces it.
func (r *Runtime) exited(p *podState, c *container, pr *proc, exit ExitStatus) {
	r.mu.Lock()
	if c.proc == pr {
		c.proc = nil
		c.rec.PID, c.rec.PGID, c.rec.StartTicks = 0, 0, 0
		c.rec.Exit = &exit
		if r.pods[p.uid] == p {
			r.persistLocked(p, c)
		}
	}
	ev := r.eventLocked(ContainerExited, p, c.rec.Name)
	r.mu.Unlock()
	r.log.V(2).Info("Container exited", "pod", p.uid, "container", c.rec.Name, "code", exit.Code, "reason", exit.Reason)
	// Announce before done closes, so PodStopped always follows.
	r.emit(ev)
	close(pr.done)
}

// signal sends sig to pr's process group, unless pr has already ended.
func (r *Runtime) signal(pr *proc, sig syscall.Signal) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.reaped {
		return
	}
	if pr.adopted && !sameProcess(pr.pid, pr.startTicks) {
		// Not our child: its PID may already belong to someone else. Its
		// watcher kills what it left behind.
		return
	}
	if err := signalGroup(pr.pgid, sig); err != nil {
		r.log.Error(err, "Cannot signal a container process", "pid", pr.pid)
	}
}

// SyncTerminatingPod stops every process of the pod: SIGTERM to each
// container's process group, up to gracePeriod seconds for them to exit,
// then SIGKILL to what remains. When ctx ends first (the engine cancels it
// when the grace period shortens, or at shutdown) it sends SIGKILL at once.
// It returns nil only when no process of the pod runs; an error (it is
// retried) when processes survive SIGKILL for Options.KillTimeout. Once it
// is called no container of the pod starts again. podStatusFn, when not
// nil, is applied to the pod's final status (APIStatus). status is not
// used.
func (r *Runtime) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, _ PodStatus, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	if r.closed() {
		return ErrClosed
	}
	r.mu.Lock()
	p := r.pods[pod.UID]
	if p == nil {
		r.mu.Unlock()
		return nil
	}
	p.terminating = true
	p.earlier = false
	if podStatusFn != nil {
		p.finalize = podStatusFn
	}
	procs := p.procsLocked()
	r.mu.Unlock()

	if err := r.stop(ctx, procs, time.Duration(max(gracePeriod, 1))*time.Second); err != nil {
		return fmt.Errorf("processruntime: stopping pod %s: %w", podName(pod), err)
	}
	r.mu.Lock()
	p.stopped = true
	ev := r.eventLocked(PodStopped, p, "")
	r.mu.Unlock()
	r.emit(ev)
	return nil
}

// procsLocked returns the running processes of the pod.
func (p *podState) procsLocked() []*proc {
	var out []*proc
	for _, c := range p.containers {
		if c.proc != nil {
			out = append(out, c.proc)
		}
	}
	return out
}

// stop terminates procs: SIGTERM, grace, SIGKILL (at once when ctx ends),
// then waits for what they left behind to disappear.
func (r *Runtime) stop(ctx context.Context, procs []*proc, grace time.Duration) error {
	if len(procs) == 0 {
		return nil
	}
	ctxDone := ctx.Done()
	escalated := false
	var deadline clock.Timer
	defer func() { deadline.Stop() }()
	escalate := func() {
		escalated = true
		ctxDone = nil
		for _, pr := range procs {
			r.signal(pr, syscall.SIGKILL)
		}
		if deadline != nil {
			deadline.Stop()
		}
		deadline = r.clock.NewTimer(r.killTimeout)
	}
	if ctx.Err() != nil {
		escalate()
	} else {
		for _, pr := range procs {
			r.signal(pr, syscall.SIGTERM)
		}
		deadline = r.clock.NewTimer(grace)
	}
	for _, pr := range procs {
		for waiting := true; waiting; {
			select {
			case <-pr.done:
				waiting = false
			case <-ctxDone:
				escalate()
			case <-deadline.C():
				if escalated {
					return fmt.Errorf("process %d still runs %v after SIGKILL", pr.pid, r.killTimeout)
				}
				escalate()
			case <-r.closing:
				return ErrClosed
			}
		}
	}
	// Every main process has ended and its group was killed then; wait for
	// the processes it left behind to be gone from the process table.
	var ticker clock.Ticker
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	if !escalated {
		deadline.Stop()
		deadline = r.clock.NewTimer(r.killTimeout)
	}
	for {
		var left []int
		for _, pr := range procs {
			members, err := groupMembers(pr.pgid, pr.startTicks)
			if err != nil {
				return err
			}
			if len(members) > 0 {
				left = append(left, members...)
				_ = signalGroup(pr.pgid, syscall.SIGKILL)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if ticker == nil {
			ticker = r.clock.NewTicker(r.poll)
		}
		select {
		case <-ticker.C():
		case <-deadline.C():
			return fmt.Errorf("processes %v left behind by the pod still run %v after SIGKILL", left, r.killTimeout)
		case <-r.closing:
			return ErrClosed
		}
	}
}

// SyncTerminatedPod releases the pod's resources: its scratch directory
// is removed and the pod leaves RuntimePods. What is left is its
// tombstone: the container logs (LogPath) and the containers' final states
// (PodStatus), kept while config still has the pod, until PruneTombstones
// removes them. A SyncPod for the UID afterwards (the engine restarting it)
// starts it clean. A restarted agent reads the tombstone back, so a pod
// that finished is not run again (see SyncPod).
//
// It is idempotent. It fails, changing nothing, while any process of the
// pod still runs (SyncTerminatingPod must succeed first), and when the
// tombstone cannot be recorded (it is retried). status is not used.
func (r *Runtime) SyncTerminatedPod(_ context.Context, pod *v1.Pod, _ PodStatus) error {
	if r.closed() {
		return ErrClosed
	}
	if err := validUID(pod.UID); err != nil {
		return fmt.Errorf("processruntime: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pods[pod.UID]
	if p == nil {
		// Never synced (or pruned already): there is nothing to keep.
		if err := os.RemoveAll(r.PodDir(pod.UID)); err != nil {
			return fmt.Errorf("processruntime: removing the directory of pod %s: %w", podName(pod), err)
		}
		return nil
	}
	if err := p.requireStoppedLocked(podName(pod)); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(p.dir, scratchDir)); err != nil {
		return fmt.Errorf("processruntime: removing the scratch directory of pod %s: %w", podName(pod), err)
	}
	if !p.cleanedUp {
		p.cleanedUp = true
		if err := r.writePodRecordLocked(p); err != nil {
			p.cleanedUp = false
			return err
		}
	}
	p.terminating, p.stopped, p.earlier = true, true, false
	return nil
}

// requireStoppedLocked fails when a container process of the pod runs or
// is being started.
func (p *podState) requireStoppedLocked(name string) error {
	for _, c := range p.containers {
		if c.proc != nil || c.starting {
			return fmt.Errorf("processruntime: pod %s still has a running container %q; it must be terminated before it is cleaned up", name, c.rec.Name)
		}
	}
	return nil
}

// Tombstones lists the pods of which only a tombstone is left (logs and
// final container states, after SyncTerminatedPod), sorted by UID. The
// slice is the caller's.
func (r *Runtime) Tombstones() []podworker.RuntimePod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []podworker.RuntimePod
	for _, p := range r.pods {
		if p.cleanedUp {
			out = append(out, podworker.RuntimePod{UID: p.uid, Namespace: p.namespace, Name: p.name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// PruneTombstones removes the tombstones (see SyncTerminatedPod) of the
// pods keep does not want, and returns their UIDs. An agent calls it from
// its housekeeping with keep reporting whether config still has the UID, so
// a pod's logs last exactly as long as the pod is in config. It must only
// be called once every config source has delivered its pods: a tombstone
// removed while its pod is still wanted lets the pod run again after an
// agent restart. keep is called without the runtime's lock held. Pods that
// are not tombstones are never touched. The error joins the failures to
// remove a directory (those tombstones are kept, to be pruned next time).
func (r *Runtime) PruneTombstones(keep func(uid types.UID) bool) ([]types.UID, error) {
	if r.closed() {
		return nil, ErrClosed
	}
	var drop []types.UID
	for _, rp := range r.Tombstones() {
		if !keep(rp.UID) {
			drop = append(drop, rp.UID)
		}
	}
	var removed []types.UID
	var errs []error
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, uid := range drop {
		p := r.pods[uid]
		if p == nil || !p.cleanedUp {
			// SyncPod restarted the UID since keep was asked.
			continue
		}
		if err := os.RemoveAll(p.dir); err != nil {
			errs = append(errs, fmt.Errorf("processruntime: removing the tombstone of pod %s/%s (%s): %w", p.namespace, p.name, uid, err))
			continue
		}
		delete(r.pods, uid)
		removed = append(removed, uid)
		r.log.V(2).Info("Removed the tombstone of a pod config no longer has", "pod", uid)
	}
	return removed, errors.Join(errs...)
}

// remove forgets a pod with nothing running and deletes its directory.
func (r *Runtime) remove(uid types.UID, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pods[uid]; p != nil {
		if err := p.requireStoppedLocked(name); err != nil {
			return err
		}
		delete(r.pods, uid)
	}
	if err := os.RemoveAll(r.PodDir(uid)); err != nil {
		return fmt.Errorf("processruntime: removing the directory of pod %s: %w", name, err)
	}
	return nil
}

// SyncTerminatingRuntimePod stops a pod known only from the state
// directory (an orphan of a previous run, or a pod config no longer
// knows), with a grace period of 1 second, then removes its directory. It
// also kills any process still carrying the pod's UID in its environment
// (for pods whose records were lost). It returns nil only when none of the
// pod's processes runs.
func (r *Runtime) SyncTerminatingRuntimePod(ctx context.Context, rp podworker.RuntimePod) error {
	if r.closed() {
		return ErrClosed
	}
	if err := validUID(rp.UID); err != nil {
		return fmt.Errorf("processruntime: %w", err)
	}
	name := rp.Namespace + "/" + rp.Name
	r.mu.Lock()
	p := r.pods[rp.UID]
	var procs []*proc
	if p != nil {
		p.terminating = true
		procs = p.procsLocked()
	}
	r.mu.Unlock()
	if err := r.stop(ctx, procs, time.Second); err != nil {
		return fmt.Errorf("processruntime: stopping runtime pod %s (%s): %w", name, rp.UID, err)
	}
	if err := r.killStrays(ctx, rp.UID); err != nil {
		return fmt.Errorf("processruntime: stopping runtime pod %s (%s): %w", name, rp.UID, err)
	}
	var ev *Event
	if p != nil {
		r.mu.Lock()
		p.stopped = true
		e := r.eventLocked(PodStopped, p, "")
		ev = &e
		r.mu.Unlock()
	}
	if err := r.remove(rp.UID, name); err != nil {
		return err
	}
	if ev != nil {
		r.emit(*ev)
	}
	return nil
}

// killStrays kills the processes that carry uid in their environment but
// that the runtime has no record of, and waits until they are gone.
func (r *Runtime) killStrays(ctx context.Context, uid types.UID) error {
	found, err := ScanProcesses(func(u string) bool { return u == string(uid) })
	if err != nil || len(found) == 0 {
		return err
	}
	r.log.Info("Killing untracked processes of a runtime pod", "pod", uid, "count", len(found))
	t := r.clock.NewTicker(r.poll)
	defer t.Stop()
	deadline := r.clock.NewTimer(r.killTimeout)
	defer deadline.Stop()
	for {
		alive := 0
		for _, sp := range found {
			// Checked just before the kill: a PID whose start time changed
			// belongs to another process now.
			if sameProcess(sp.PID, sp.StartTicks) {
				alive++
				_ = syscall.Kill(sp.PID, syscall.SIGKILL)
			}
		}
		if alive == 0 {
			return nil
		}
		select {
		case <-t.C():
		case <-deadline.C():
			return fmt.Errorf("%d untracked processes still run %v after SIGKILL", alive, r.killTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// snapshotLocked builds the pod's PodStatus.
func (r *Runtime) snapshotLocked(p *podState) PodStatus {
	s := PodStatus{UID: p.uid, Namespace: p.namespace, Name: p.name, StartedAt: p.startedAt, Stopped: p.stopped, Time: r.clock.Now(), finalize: p.finalize}
	now := s.Time
	add := func(c *container) ContainerStatus {
		cs := ContainerStatus{Name: c.rec.Name, Image: c.image, RestartCount: int32(c.rec.Restarts), Exit: copyExit(c.rec.Exit), LastExit: copyExit(c.rec.LastExit)}
		switch {
		case c.proc != nil:
			cs.State, cs.PID, cs.StartedAt, cs.ID = ContainerStateRunning, c.proc.pid, c.proc.startedAt, c.proc.id
		case c.rec.Exit != nil:
			cs.State, cs.ID = ContainerStateExited, c.rec.Exit.ID
			if w := r.restartWaitLocked(c, now); w > 0 {
				cs.BackOffUntil = now.Add(w)
			}
		default:
			cs.State = ContainerStateWaiting
		}
		return cs
	}
	if p.spec != nil {
		for _, spec := range p.spec.Spec.InitContainers {
			if c := p.containers[spec.Name]; c != nil {
				s.InitContainers = append(s.InitContainers, add(c))
			}
		}
		for _, spec := range p.spec.Spec.Containers {
			if c := p.containers[spec.Name]; c != nil {
				s.Containers = append(s.Containers, add(c))
			}
		}
		return s
	}
	names := make([]string, 0, len(p.containers))
	for n := range p.containers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := p.containers[n]
		if c.rec.Init {
			s.InitContainers = append(s.InitContainers, add(c))
		} else {
			s.Containers = append(s.Containers, add(c))
		}
	}
	return s
}

func copyExit(e *ExitStatus) *ExitStatus {
	if e == nil {
		return nil
	}
	c := *e
	return &c
}
