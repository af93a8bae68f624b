package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/internal/sourcepods"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podmanager"
	"github.com/podkit/podkit/podworker"
)

// PodUpdater is how the Handler hands desired state to the pod workers.
// *podworker.PodWorkers[T] implements it; see that type for the full
// contract. Both methods are called from the Handler's callers' goroutines
// and must be safe for concurrent use.
type PodUpdater interface {
	// UpdatePod records a desired state for a pod and returns without
	// waiting for hooks. An error means nothing was recorded.
	UpdatePod(ctx context.Context, opts podworker.UpdatePodOptions) error
	// SyncKnownPods tells the workers which pods are desired and reports
	// every worker kept.
	SyncKnownPods(desired []*v1.Pod) map[types.UID]podworker.PodWorkerSync
}

// PodWindow is the part of the pod workers' window the Handler asks, by UID
// or full name. *podworker.PodWorkers[T] implements it. The methods must be
// safe for concurrent use and must not block.
type PodWindow interface {
	// IsPodKnownTerminated: the pod's containers are known stopped (its
	// resources no longer count as in use).
	IsPodKnownTerminated(uid types.UID) bool
	// IsPodTerminationRequested: the pod is being stopped, so it is not
	// admitted again and a Create for it means a restart after it.
	IsPodTerminationRequested(uid types.UID) bool
	// IsPodForMirrorPodTerminatingByFullName: the static pod holding
	// fullName is still stopping, so its mirror pod is kept.
	IsPodForMirrorPodTerminatingByFullName(fullName string) bool
}

// PodSnapshotter gives snapshots of the pod workers. *podworker.PodWorkers[T]
// implements it. Housekeeping reads one worker to know whether a static pod
// has started (its mirror pod is kept only then); ShutdownNode lists them
// all. The methods must be safe for concurrent use and must not block.
type PodSnapshotter interface {
	// Pod returns a snapshot of the worker of uid; false when there is
	// none.
	Pod(uid types.UID) (podworker.PodInfo, bool)
	// Pods returns a snapshot of every worker; the slice is the caller's.
	Pods() []podworker.PodInfo
}

// PodWorkers is everything the Handler needs from the pod workers, made of
// the three role interfaces above. *podworker.PodWorkers[T] implements it
// for every T; an agent may wrap one (to trace calls, say) or substitute its
// own.
type PodWorkers interface {
	PodUpdater
	PodWindow
	PodSnapshotter
}

var _ PodWorkers = (*podworker.PodWorkers[struct{}])(nil)

// RuntimePodLister lists the pods the container runtime has, so
// housekeeping can kill those no pod worker knows (left over from before the
// agent started, or from a crash). It is optional: without it that step is
// skipped.
type RuntimePodLister interface {
	// ListRuntimePods returns every pod that has a container or sandbox in
	// the runtime, running or not yet removed. It is called from the sync
	// loop's goroutine during Housekeeping, must honour ctx, and must not
	// call the Handler's Handle*, Dispatch or Housekeeping methods. The
	// slice is the caller's. An error makes housekeeping skip the steps
	// that need the list (it is returned by Housekeeping); the other steps
	// still run.
	ListRuntimePods(ctx context.Context) ([]podworker.RuntimePod, error)
}

// RuntimePodListerFunc adapts a function to a RuntimePodLister.
type RuntimePodListerFunc func(ctx context.Context) ([]podworker.RuntimePod, error)

// ListRuntimePods calls f.
func (f RuntimePodListerFunc) ListRuntimePods(ctx context.Context) ([]podworker.RuntimePod, error) {
	return f(ctx)
}

var _ RuntimePodLister = RuntimePodListerFunc(nil)

// DefaultHousekeepingInterval is how often Run runs Housekeeping when
// Options.HousekeepingInterval is 0, the kubelet's period.
const DefaultHousekeepingInterval = 2 * time.Second

// Options configure a Handler. The zero value is valid: every field says
// what it defaults to.
type Options struct {
	// AdmitHandlers decide, in order, whether a pod added from config may
	// run; the first rejection wins. Defaults to none: every pod is
	// admitted (unless the node is shutting down). A nil entry is an
	// error.
	AdmitHandlers []admission.Handler
	// OnReject is told of every pod admission rejects, with the status the
	// pod should now have: phase Failed, the rejection's reason, and the
	// message "Pod was rejected: " plus the rejection's message. An agent
	// with an API server writes that status there. It is called from the
	// goroutine running HandlePodAdditions (the sync loop), after the event
	// is recorded; it must not block for long and must not call the
	// Handler's Handle*, Dispatch or Housekeeping methods. The pod is
	// shared: read it, do not modify it. Defaults to nil: rejections are
	// only logged and recorded as events.
	OnReject func(ctx context.Context, pod *v1.Pod, status v1.PodStatus)
	// MirrorClient creates and deletes the mirror pods of static pods.
	// Defaults to nil: the agent runs without an API server and
	// housekeeping leaves mirror pods alone.
	MirrorClient mirror.MirrorPodClient
	// RuntimePods lists the pods in the container runtime, for
	// housekeeping to kill those no worker knows. Defaults to nil: that
	// step is skipped.
	RuntimePods RuntimePodLister
	// Sources names the config sources that must each have delivered an
	// update before the Handler acts on the absence of a pod: until then
	// HandlePodRemoves does not kill and Run does not run housekeeping, so
	// pods a slow source has not yet sent are not taken for orphans.
	// Defaults to none: the Handler is ready at once. An agent with an API
	// server source should list it.
	Sources []string
	// RunWorkers, when set, is the pod workers' Run (pass w.Run): Run
	// starts it, stops it after its own loop has stopped, and returns only
	// after it has returned, so one call runs and drains the whole agent.
	// Defaults to nil: the caller runs the workers itself.
	RunWorkers func(ctx context.Context) error
	// HousekeepingInterval is how often Run runs Housekeeping. Defaults to
	// DefaultHousekeepingInterval; negative is an error.
	HousekeepingInterval time.Duration
	// Recorder receives events about pods: admission rejections, invalid
	// pods in a config update, mirror pod failures. Defaults to none.
	Recorder Recorder
	// Logger receives the Handler's logs: errors and node shutdown at
	// level 0, each config update at V(2), what happens to each pod at
	// V(4). Defaults to the zero Logger, which discards.
	Logger logr.Logger
	// Clock drives housekeeping and the node shutdown budget, and stamps
	// the start time of each update. Defaults to the real clock.
	Clock clock.WithTicker
}

// Handler is a node agent's sync loop: it takes config updates, keeps the
// desired pods in a podmanager.DesiredPodStore, admits new pods, drives the
// pod workers with UpdatePod, and runs housekeeping that closes the loop
// (SyncKnownPods, re-adding desired pods, killing orphans, keeping mirror
// pods in step). See the package documentation for how to wire it.
//
// Create it with NewHandler. Dispatch, the Handle* methods and Housekeeping
// are serialized with each other (they form the sync loop's critical
// section) and may be called from any goroutine; Run calls them from its
// own. GetActivePods, SourcesReady and ShutdownNode may be called at any
// time from any goroutine.
type Handler struct {
	workers    PodWorkers
	store      podmanager.DesiredPodStore
	admitters  admission.Chain
	onReject   func(context.Context, *v1.Pod, v1.PodStatus)
	mirrors    mirror.MirrorPodClient
	runtime    RuntimePodLister
	sources    []string
	runWorkers func(context.Context) error
	interval   time.Duration
	recorder   Recorder
	log        logr.Logger
	clock      clock.WithTicker

	// loop serializes the sync loop's work: Dispatch, Handle*,
	// Housekeeping. It is held while admission handlers, OnReject, the
	// RuntimePodLister and the MirrorClient run, which is why those must
	// not call back into these methods.
	loop sync.Mutex

	// mu guards the fields below. It is never held while calling out.
	mu sync.Mutex
	// rejected holds the UIDs of desired pods admission rejected. They
	// never reach the workers and are not active.
	rejected map[types.UID]struct{}
	// seen holds the sources that have delivered an update.
	seen map[string]struct{}
	// running is set by Run, which may be called once.
	running bool

	// shuttingDown is set by ShutdownNode: no pod is admitted or restarted
	// from then on.
	shuttingDown atomic.Bool
}

// NewHandler returns a Handler over workers (the pod workers, normally a
// *podworker.PodWorkers[T]) and store (the desired pods, normally a
// *podmanager.Manager). It starts nothing. It returns an error, prefixed
// "lifecycle: ", for a nil workers or store and for invalid options.
func NewHandler(workers PodWorkers, store podmanager.DesiredPodStore, opts Options) (*Handler, error) {
	if workers == nil {
		return nil, errors.New("lifecycle: NewHandler needs the pod workers, got nil")
	}
	if store == nil {
		return nil, errors.New("lifecycle: NewHandler needs a desired pod store, got nil")
	}
	for i, a := range opts.AdmitHandlers {
		if a == nil {
			return nil, fmt.Errorf("lifecycle: Options.AdmitHandlers[%d] is nil", i)
		}
	}
	for i, s := range opts.Sources {
		if s == "" {
			return nil, fmt.Errorf("lifecycle: Options.Sources[%d] is empty", i)
		}
	}
	if opts.HousekeepingInterval < 0 {
		return nil, fmt.Errorf("lifecycle: Options.HousekeepingInterval is %v; want 0 (default) or more", opts.HousekeepingInterval)
	}
	if opts.HousekeepingInterval == 0 {
		opts.HousekeepingInterval = DefaultHousekeepingInterval
	}
	if opts.Recorder == nil {
		opts.Recorder = nopRecorder{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Handler{
		workers:    workers,
		store:      store,
		admitters:  admission.Chain(slices.Clone(opts.AdmitHandlers)),
		onReject:   opts.OnReject,
		mirrors:    opts.MirrorClient,
		runtime:    opts.RuntimePods,
		sources:    slices.Clone(opts.Sources),
		runWorkers: opts.RunWorkers,
		interval:   opts.HousekeepingInterval,
		recorder:   opts.Recorder,
		log:        opts.Logger,
		clock:      opts.Clock,
		rejected:   map[types.UID]struct{}{},
		seen:       map[string]struct{}{},
	}, nil
}

// SourcesReady reports whether every source in Options.Sources has
// delivered at least one update through Dispatch (or Run). Safe to call
// from any goroutine.
func (h *Handler) SourcesReady() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.sources {
		if _, ok := h.seen[s]; !ok {
			return false
		}
	}
	return true
}

// GetActivePods returns the desired pods whose resources are in use or
// about to be: the pods in the store, minus those admission rejected, minus
// those the workers know are terminated, minus those in a terminal phase
// whose termination was never requested (finished before this agent saw
// them). Mirror pods are never among them. Admission compares a new pod
// against them. Safe to call from any goroutine; the slice is the caller's
// and the pods are shared (do not modify them).
func (h *Handler) GetActivePods() []*v1.Pod {
	pods := h.store.GetPods()
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		if !h.isInactive(p) {
			out = append(out, p)
		}
	}
	return out
}

func (h *Handler) isInactive(p *v1.Pod) bool {
	if h.isRejected(p.UID) || h.workers.IsPodKnownTerminated(p.UID) {
		return true
	}
	return isTerminalPhase(p) && !h.workers.IsPodTerminationRequested(p.UID)
}

func isTerminalPhase(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

func (h *Handler) isRejected(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.rejected[uid]
	return ok
}

func (h *Handler) setRejected(uid types.UID, rejected bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rejected {
		h.rejected[uid] = struct{}{}
	} else {
		delete(h.rejected, uid)
	}
}

// forgetRejected drops uid from the rejected set and reports whether it was
// there.
func (h *Handler) forgetRejected(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.rejected[uid]
	delete(h.rejected, uid)
	return ok
}

// Dispatch hands one config update to the matching Handle* method: OpAdd
// to HandlePodAdditions, OpUpdate and OpDelete to HandlePodUpdates (a
// graceful deletion is an update carrying the deletion grace period),
// OpRemove to HandlePodRemoves, OpReconcile to HandlePodReconcile. Before that it stamps
// every pod with the kubernetes.io/config.source annotation naming
// u.Source (copying the pod when it said otherwise: a pod from the API
// server carrying "file" is still an API pod, never a static one), and
// drops, with a podconfig.ReasonFailedValidation event, nil pods, pods without a UID,
// mirror pods from a source other than the API server, and pods repeating
// the full name or UID of an earlier pod of the update. It then counts
// u.Source as seen (SourcesReady).
//
// Run calls it for each update it receives; an agent with its own loop may
// call it directly, from any goroutine (calls are serialized). It returns
// an error, and does nothing, for an empty source or an unknown operation.
// Problems with single pods are logged and recorded, not returned.
func (h *Handler) Dispatch(ctx context.Context, u podconfig.PodUpdate) error {
	if u.Source == "" {
		return fmt.Errorf("lifecycle: a %s update of %d pods has no source", u.Op, len(u.Pods))
	}
	if !u.Op.Valid() {
		return fmt.Errorf("lifecycle: update from source %q has unknown operation %d", u.Source, int(u.Op))
	}
	var pods []*v1.Pod
	if u.Op == podconfig.OpRemove {
		pods = make([]*v1.Pod, 0, len(u.Pods))
		for _, p := range u.Pods {
			if p != nil && p.UID != "" {
				pods = append(pods, p)
			}
		}
	} else {
		pods = sourcepods.Valid(u.Source, u.Pods, func(i int, pod *v1.Pod, reason string) {
			h.log.Info("Ignoring a pod from a config source", "source", u.Source, "index", i, "reason", reason)
			if pod != nil {
				h.recorder.Eventf(pod, v1.EventTypeWarning, podconfig.ReasonFailedValidation, "%s", reason)
			}
		})
	}
	for i, p := range pods {
		pods[i] = sourcepods.Stamp(p, u.Source)
	}
	h.log.V(2).Info("SyncLoop", "op", u.Op.String(), "source", u.Source, "pods", len(pods))
	switch u.Op {
	case podconfig.OpAdd:
		h.HandlePodAdditions(ctx, pods)
	case podconfig.OpUpdate, podconfig.OpDelete:
		h.HandlePodUpdates(ctx, pods)
	case podconfig.OpRemove:
		h.HandlePodRemoves(ctx, pods)
	case podconfig.OpReconcile:
		h.HandlePodReconcile(ctx, pods)
	}
	h.mu.Lock()
	h.seen[u.Source] = struct{}{}
	h.mu.Unlock()
	return nil
}

// HandlePodAdditions handles pods new to config, oldest first (by creation
// timestamp). Each pod is recorded in the store. A mirror pod then makes its
// static pod's worker see it (a SyncPodUpdate), if the static pod is known.
// Any other pod is admitted (unless its termination was already requested
// or it is in a terminal phase) and handed to its worker with a
// SyncPodCreate. A rejected pod stays in the store but never reaches the
// workers: the rejection is logged, recorded as a Warning event on the pod,
// and passed to Options.OnReject.
//
// Called from any goroutine; serialized with the other Handle* methods,
// Dispatch and Housekeeping. The pods are handed over (see PodUpdate); the
// slice is not kept or modified. The caller stamps the config source
// annotation (Dispatch does). Nil pods and pods without a UID are logged
// and skipped.
func (h *Handler) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	h.loop.Lock()
	defer h.loop.Unlock()
	start := h.clock.Now()
	sorted := h.usable(pods, "addition")
	slices.SortStableFunc(sorted, func(a, b *v1.Pod) int {
		return a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time)
	})
	for _, pod := range sorted {
		h.store.AddPod(pod)
		pod, mirrorPod, wasMirror := h.store.GetPodAndMirrorPod(pod)
		if wasMirror {
			if pod == nil {
				h.log.V(4).Info("Mirror pod has no static pod yet; skipping", "mirrorPod", mirror.PodFullName(mirrorPod), "mirrorPodUID", mirrorPod.UID)
				continue
			}
			if !h.isRejected(pod.UID) {
				h.update(ctx, podworker.SyncPodUpdate, pod, mirrorPod, start)
			}
			continue
		}
		if !h.workers.IsPodTerminationRequested(pod.UID) && !isTerminalPhase(pod) {
			if r := h.admitPod(ctx, pod); !r.Admit {
				h.reject(ctx, pod, r)
				continue
			}
			h.setRejected(pod.UID, false)
		}
		h.update(ctx, podworker.SyncPodCreate, pod, mirrorPod, start)
	}
}

// usable drops nil pods and pods without a UID, logging them.
func (h *Handler) usable(pods []*v1.Pod, what string) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	for i, p := range pods {
		if p == nil || p.UID == "" {
			h.log.Error(fmt.Errorf("lifecycle: pod %d of a %s has no UID or is nil", i, what), "Skipping pod")
			continue
		}
		out = append(out, p)
	}
	return out
}

// admitPod runs admission for pod against the other active pods.
func (h *Handler) admitPod(ctx context.Context, pod *v1.Pod) admission.Result {
	if h.shuttingDown.Load() {
		return admission.Result{Reason: ReasonNodeShutdown, Message: "Pod was rejected as the node is shutting down."}
	}
	active := h.GetActivePods()
	others := slices.DeleteFunc(active, func(p *v1.Pod) bool { return p.UID == pod.UID })
	return h.admitters.Admit(ctx, &admission.Attributes{Pod: pod, OtherPods: others, Operation: admission.AddOperation})
}

func (h *Handler) reject(ctx context.Context, pod *v1.Pod, r admission.Result) {
	h.setRejected(pod.UID, true)
	h.log.V(4).Info("Pod was rejected by admission", "pod", mirror.PodFullName(pod), "podUID", pod.UID, "reason", r.Reason, "message", r.Message)
	h.recorder.Eventf(pod, v1.EventTypeWarning, r.Reason, "%s", r.Message)
	if h.onReject != nil {
		h.onReject(ctx, pod, v1.PodStatus{
			Phase:    v1.PodFailed,
			Reason:   r.Reason,
			Message:  "Pod was rejected: " + r.Message,
			QOSClass: pod.Status.QOSClass,
		})
	}
}

// HandlePodUpdates handles pods whose desired state changed, including
// graceful deletions: each is recorded in the store and its worker gets a
// SyncPodUpdate with the pod and its mirror pod (a mirror pod's update goes
// to its static pod; one without a static pod is skipped). Pods admission
// rejected are recorded but not sent. Threading and ownership as for
// HandlePodAdditions.
func (h *Handler) HandlePodUpdates(ctx context.Context, pods []*v1.Pod) {
	h.loop.Lock()
	defer h.loop.Unlock()
	start := h.clock.Now()
	for _, pod := range h.usable(pods, "update") {
		h.store.UpdatePod(pod)
		pod, mirrorPod, wasMirror := h.store.GetPodAndMirrorPod(pod)
		if wasMirror && pod == nil {
			h.log.V(4).Info("Mirror pod has no static pod; skipping", "mirrorPod", mirror.PodFullName(mirrorPod), "mirrorPodUID", mirrorPod.UID)
			continue
		}
		if h.isRejected(pod.UID) {
			h.log.V(4).Info("Pod was rejected by admission; not syncing its update", "pod", mirror.PodFullName(pod), "podUID", pod.UID)
			continue
		}
		h.update(ctx, podworker.SyncPodUpdate, pod, mirrorPod, start)
	}
}

// HandlePodRemoves handles pods config no longer has: each is removed from
// the store. A removed mirror pod makes its static pod's worker see the
// change (a SyncPodUpdate; housekeeping recreates the mirror). Any other pod
// is killed (a SyncPodKill with its own grace period), but only once the
// sources are ready (SourcesReady); before that, housekeeping kills it
// later as an orphan. Pods admission rejected are only forgotten. Threading
// and ownership as for HandlePodAdditions; only the pods' UIDs are read.
func (h *Handler) HandlePodRemoves(ctx context.Context, pods []*v1.Pod) {
	h.loop.Lock()
	defer h.loop.Unlock()
	start := h.clock.Now()
	for _, pod := range h.usable(pods, "removal") {
		h.store.RemovePod(pod)
		wasRejected := h.forgetRejected(pod.UID)
		pod, mirrorPod, wasMirror := h.store.GetPodAndMirrorPod(pod)
		if wasMirror {
			if pod == nil || h.isRejected(pod.UID) {
				continue
			}
			h.update(ctx, podworker.SyncPodUpdate, pod, mirrorPod, start)
			continue
		}
		if wasRejected {
			continue
		}
		if !h.SourcesReady() {
			h.log.V(4).Info("Not killing removed pod: the config sources are not all ready; housekeeping will", "pod", mirror.PodFullName(pod), "podUID", pod.UID)
			continue
		}
		h.log.V(4).Info("Pod was removed from config and must be killed", "pod", mirror.PodFullName(pod), "podUID", pod.UID)
		h.update(ctx, podworker.SyncPodKill, pod, nil, start)
	}
}

// HandlePodReconcile handles pods of which only the status changed: each is
// recorded in the store, and its worker gets a SyncPodSync if the pod has
// readiness gates and its Ready condition disagrees with what its
// containers and gates say (the agent's status writer must correct it).
// Threading and ownership as for HandlePodAdditions.
func (h *Handler) HandlePodReconcile(ctx context.Context, pods []*v1.Pod) {
	h.loop.Lock()
	defer h.loop.Unlock()
	start := h.clock.Now()
	for _, pod := range h.usable(pods, "reconcile") {
		h.store.UpdatePod(pod)
		pod, mirrorPod, wasMirror := h.store.GetPodAndMirrorPod(pod)
		if wasMirror && pod == nil {
			continue
		}
		if h.isRejected(pod.UID) {
			continue
		}
		if readinessNeedsReconcile(pod) {
			h.update(ctx, podworker.SyncPodSync, pod, mirrorPod, start)
		}
	}
}

// readinessNeedsReconcile reports whether pod has readiness gates and a
// Ready condition whose status is not what its containers and gates give.
func readinessNeedsReconcile(pod *v1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	var current *v1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			current = &pod.Status.Conditions[i]
		}
	}
	if current == nil {
		return false
	}
	want := v1.ConditionTrue
	if !containersReady(pod) {
		want = v1.ConditionFalse
	}
	for _, gate := range pod.Spec.ReadinessGates {
		ok := false
		for _, c := range pod.Status.Conditions {
			if c.Type == gate.ConditionType && c.Status == v1.ConditionTrue {
				ok = true
			}
		}
		if !ok {
			want = v1.ConditionFalse
		}
	}
	return current.Status != want
}

// containersReady reports whether every container that must be ready (the
// regular ones and the sidecars) has a ready status, in a pod that is not
// in a terminal phase.
func containersReady(pod *v1.Pod) bool {
	if isTerminalPhase(pod) {
		return false
	}
	ready := map[string]bool{}
	for _, s := range pod.Status.InitContainerStatuses {
		ready[s.Name] = s.Ready
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways && !ready[c.Name] {
			return false
		}
	}
	ready = map[string]bool{}
	for _, s := range pod.Status.ContainerStatuses {
		ready[s.Name] = s.Ready
	}
	for _, c := range pod.Spec.Containers {
		if !ready[c.Name] {
			return false
		}
	}
	return true
}

// HandlePodSyncs asks the workers to sync pods again (a SyncPodSync), for
// instance after a runtime event. Mirror pods are skipped (sync the static
// pod instead), as are pods admission rejected. The pod's mirror pod is
// looked up in the store. Threading and ownership as for
// HandlePodAdditions.
func (h *Handler) HandlePodSyncs(ctx context.Context, pods []*v1.Pod) {
	h.loop.Lock()
	defer h.loop.Unlock()
	start := h.clock.Now()
	for _, pod := range h.usable(pods, "sync") {
		pod, mirrorPod, wasMirror := h.store.GetPodAndMirrorPod(pod)
		if wasMirror {
			h.log.V(4).Info("HandlePodSyncs was given a mirror pod; sync its static pod instead", "mirrorPod", mirror.PodFullName(mirrorPod))
			continue
		}
		if h.isRejected(pod.UID) {
			continue
		}
		h.update(ctx, podworker.SyncPodSync, pod, mirrorPod, start)
	}
}

// update sends one update to the workers and logs a failure.
func (h *Handler) update(ctx context.Context, t podworker.UpdateType, pod, mirrorPod *v1.Pod, start time.Time) {
	h.send(ctx, podworker.UpdatePodOptions{UpdateType: t, Pod: pod, MirrorPod: mirrorPod, StartTime: start})
}

func (h *Handler) send(ctx context.Context, opts podworker.UpdatePodOptions) bool {
	err := h.workers.UpdatePod(ctx, opts)
	if err == nil {
		return true
	}
	var name string
	var uid types.UID
	if opts.Pod != nil {
		name, uid = mirror.PodFullName(opts.Pod), opts.Pod.UID
	} else if opts.RunningPod != nil {
		name, uid = mirror.BuildPodFullName(opts.RunningPod.Name, opts.RunningPod.Namespace), opts.RunningPod.UID
	}
	switch {
	case errors.Is(err, podworker.ErrStopped), ctx.Err() != nil:
		h.log.V(4).Info("Pod update not delivered: the pod workers or the loop stopped", "pod", name, "podUID", uid, "updateType", opts.UpdateType.String(), "err", err.Error())
	default:
		h.log.Error(err, "Pod workers refused an update", "pod", name, "podUID", uid, "updateType", opts.UpdateType.String())
	}
	return false
}
