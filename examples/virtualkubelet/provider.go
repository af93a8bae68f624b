package virtualkubelet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/podworker"
)

// Options configure a Provider. The zero value is valid: every field says
// what it defaults to.
type Options struct {
	// NodeName is the name of the virtual node, reported in the stats
	// summary (GetStatsSummary). Defaults to none.
	NodeName string
	// Pods is the provider's view of the API server's pods: the lister
	// virtual-kubelet hands to providers (nodeutil.ProviderConfig.Pods).
	// With it the provider knows when a pod's API object is gone (so its
	// worker may be forgotten and a same-named newcomer is a different
	// pod), confirms that a terminal status reached the API server before
	// it stops re-sending it, and adopts backend pods that survived a
	// restart instead of killing them. Defaults to none: a pod then counts
	// as present in the API server until DeletePod says otherwise, a status
	// counts as delivered once the NotifyPods callback returned, and every
	// backend pod the provider was not told about is an orphan.
	Pods corev1listers.PodLister
	// ResyncInterval is how often a running pod's status is read again
	// from the backend (the engine's resync). Defaults to 5 seconds, as
	// virtual-kubelet's own polling of providers.
	ResyncInterval time.Duration
	// BackOff and MaxBackOff bound the engine's per-pod retry delays after
	// a failed backend call. Default to podworker's (1s, 2m).
	BackOff, MaxBackOff time.Duration
	// MaxConcurrentSyncs caps backend calls in flight across all pods.
	// Defaults to 0: no cap.
	MaxConcurrentSyncs int
	// HousekeepingInterval is how often the provider forgets pods whose
	// API object is gone and stops orphans in the backend. Defaults to 2
	// seconds, as the kubelet's housekeeping.
	HousekeepingInterval time.Duration
	// NotifyRetry and NotifyRetryMax bound the delays between re-sends of
	// a terminal status not yet confirmed (exponential). Default to 100ms
	// and 10s.
	NotifyRetry, NotifyRetryMax time.Duration
	// NotifyWorkers is how many goroutines call the NotifyPods callback
	// (which may block); one pod's notifications never overlap. Defaults
	// to 2.
	NotifyWorkers int
	// Clock is the source of all time and timers. Defaults to the real
	// clock.
	Clock clock.WithTicker
	// Logger receives the provider's and the engine's logs. Defaults to
	// the zero Logger, which discards.
	Logger logr.Logger
}

func (o *Options) complete() error {
	if o.ResyncInterval < 0 || o.HousekeepingInterval < 0 || o.NotifyRetry < 0 || o.NotifyRetryMax < 0 || o.NotifyWorkers < 0 {
		return errors.New("virtualkubelet: negative interval or worker count in Options")
	}
	if o.ResyncInterval == 0 {
		o.ResyncInterval = 5 * time.Second
	}
	if o.HousekeepingInterval == 0 {
		o.HousekeepingInterval = 2 * time.Second
	}
	if o.NotifyRetry == 0 {
		o.NotifyRetry = 100 * time.Millisecond
	}
	if o.NotifyRetryMax == 0 {
		o.NotifyRetryMax = max(10*time.Second, o.NotifyRetry)
	}
	if o.NotifyRetryMax < o.NotifyRetry {
		return fmt.Errorf("virtualkubelet: NotifyRetryMax %v is below NotifyRetry %v", o.NotifyRetryMax, o.NotifyRetry)
	}
	if o.NotifyWorkers == 0 {
		o.NotifyWorkers = 2
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return nil
}

// Provider is a virtual-kubelet provider (node.PodLifecycleHandler and
// node.PodNotifier) that runs pods on a Backend through a lifecycle.Agent:
// the pods virtual-kubelet hands it are the agent's config source (the API
// server's), its sync loop drives the pod workers and does housekeeping,
// and the status notifier is one of its loops. See the package doc for
// what it guarantees.
//
// Create it with New and start it with Run. All methods are safe for
// concurrent use.
type Provider struct {
	backend Backend
	lister  BackendLister  // nil when the backend cannot list
	updater BackendUpdater // nil when the backend cannot update
	metrics BackendMetrics // nil when the backend reports no usage
	streams BackendStreams // nil when the backend cannot exec, attach or forward
	api     corev1listers.PodLister
	opts    Options
	agent   *lifecycle.Agent[*RemotePod]
	workers *podworker.PodWorkers[*RemotePod]
	// changed has a value when the desired pods changed and the source has
	// not yet sent them.
	changed chan struct{}

	// mu guards everything below. It is never held while the backend, the
	// NotifyPods callback or the sync loop runs; it is held across the
	// engine's UpdatePod (which never blocks).
	mu sync.Mutex
	// entries holds every pod the provider was given and the engine has
	// not forgotten, by UID.
	entries map[types.UID]*entry
	// names maps "namespace/name" to the UID most recently given for it:
	// the pod that holds the name in the API server.
	names map[string]types.UID
	// notify is the callback NotifyPods registered; nil before.
	notify func(*v1.Pod)
	// queue holds UIDs whose status is to be sent; nil until Run.
	queue workqueue.TypedRateLimitingInterface[types.UID]
	// started is set by Run, stopped once it returned.
	started, stopped bool
	// startedAt is when Run started (the node's start time in stats).
	startedAt time.Time
}

// entry is what the provider keeps for one pod UID.
type entry struct {
	// pod is the newest desired pod; never mutated (replaced instead).
	pod *v1.Pod
	// status is the newest status the hooks computed, nil before the
	// first; final says its containers are all stopped. A final status is
	// never replaced by a non-final one.
	status *v1.PodStatus
	final  bool
	// version counts status changes, so a delivery confirmation applies
	// only to the status it confirmed.
	version   uint64
	delivered bool
	// deleting: deletion was requested (the pod is hidden from GetPod so
	// that a same-named successor is created, not compared with it).
	deleting bool
	// gone: the pod's API object no longer exists (DeletePod of a pod the
	// API server no longer has, or its name was taken by another UID). No
	// status is sent for it any more.
	gone bool
	// created: the backend accepted the pod (or had it already).
	created bool
}

var (
	_ node.PodLifecycleHandler = (*Provider)(nil)
	_ node.PodNotifier         = (*Provider)(nil)
)

// New returns a Provider running pods on backend. It starts nothing: call
// Run. The returned error says which option is invalid.
func New(backend Backend, opts Options) (*Provider, error) {
	if backend == nil {
		return nil, errors.New("virtualkubelet: New needs a Backend, got nil")
	}
	if err := opts.complete(); err != nil {
		return nil, err
	}
	p := &Provider{
		backend: backend,
		api:     opts.Pods,
		opts:    opts,
		entries: map[types.UID]*entry{},
		names:   map[string]types.UID{},
	}
	p.lister, _ = backend.(BackendLister)
	p.updater, _ = backend.(BackendUpdater)
	p.metrics, _ = backend.(BackendMetrics)
	p.streams, _ = backend.(BackendStreams)
	p.changed = make(chan struct{}, 1)
	a, err := lifecycle.NewAgent[*RemotePod](&syncer{p: p}, lifecycle.AgentOptions[*RemotePod]{
		Workers: podworker.Options[*RemotePod]{
			Status:             statusSource{p: p},
			MaxConcurrentSyncs: opts.MaxConcurrentSyncs,
			ResyncInterval:     opts.ResyncInterval,
			BackOff:            opts.BackOff,
			MaxBackOff:         opts.MaxBackOff,
			Logger:             opts.Logger,
		},
		SyncLoop: lifecycle.SyncLoopOptions{
			RuntimePods:          lifecycle.RuntimePodListerFunc(p.housekeeping),
			HousekeepingInterval: opts.HousekeepingInterval,
		},
		Logger: opts.Logger,
		Clock:  opts.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("virtualkubelet: %w", err)
	}
	for _, err := range []error{
		a.AddSource(apiSource{p: p}),
		a.Add("status notifier", notifier{p: p}),
		a.Add("pod records", records{p: p}),
	} {
		if err != nil {
			return nil, fmt.Errorf("virtualkubelet: %w", err)
		}
	}
	p.agent, p.workers = a, a.Workers()
	return p, nil
}

// PodWorkers returns the engine the provider runs on. Other loops of the
// agent ask its window (CouldHaveRunningContainers, ShouldPodContentBeRemoved,
// ...) by UID, and may watch its transitions; they must not send it
// updates of their own.
func (p *Provider) PodWorkers() *podworker.PodWorkers[*RemotePod] { return p.workers }

// Agent returns the lifecycle.Agent the provider runs on, for the loops a
// provider author adds around the backend before Run (per-pod loops, a
// metrics server: Agent.Add), and for RequestSync, by which a backend's
// own events (a container exited) have a pod synced at once rather than at
// its next resync.
func (p *Provider) Agent() *lifecycle.Agent[*RemotePod] { return p.agent }

// Run runs the provider's agent (lifecycle.Agent.Run): the source of the
// pods virtual-kubelet hands over, the sync loop with its housekeeping, the
// engine, and the status notifier, until ctx ends; it then waits for all of
// them (and every backend call they made) to return. It returns nil after
// ctx ends, or an error if called twice or if a part failed. Pods given
// before Run are acted on once it runs; after it returned, CreatePod,
// UpdatePod and DeletePod return podworker.ErrStopped.
func (p *Provider) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return errors.New("virtualkubelet: Run called twice")
	}
	p.started = true
	p.startedAt = p.opts.Clock.Now()
	p.mu.Unlock()
	err := p.agent.Run(ctx)
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	return err
}

func nameKey(namespace, name string) string { return namespace + "/" + name }

func podKey(pod *v1.Pod) string { return nameKey(pod.Namespace, pod.Name) }

func checkPod(op string, pod *v1.Pod) error {
	if pod == nil {
		return errdefs.InvalidInputf("virtualkubelet: %s: nil pod", op)
	}
	if pod.UID == "" {
		return errdefs.InvalidInputf("virtualkubelet: %s: pod %s has no UID", op, podKey(pod))
	}
	return nil
}

// CreatePod hands the pod to the engine and returns at once; the backend
// is called from the pod's worker. A pod whose UID the provider already
// knows is updated instead (virtual-kubelet calls CreatePod whenever
// GetPod finds nothing by name). A pod whose name another UID held is a new
// pod: the older one's API object is gone, so it is stopped with a grace
// period of 1 second. The provider keeps a copy of pod.
func (p *Provider) CreatePod(ctx context.Context, pod *v1.Pod) error {
	if err := checkPod("CreatePod", pod); err != nil {
		return err
	}
	return p.apply(ctx, pod.DeepCopy())
}

// UpdatePod hands the changed pod to the engine and returns at once. An
// update for a UID the provider does not know is a create (see CreatePod).
// The provider keeps a copy of pod.
func (p *Provider) UpdatePod(ctx context.Context, pod *v1.Pod) error {
	if err := checkPod("UpdatePod", pod); err != nil {
		return err
	}
	return p.apply(ctx, pod.DeepCopy())
}

// apply records pod as the desired state of its UID; the source sends it
// to the sync loop (a new UID is an addition, a known one an update).
func (p *Provider) apply(ctx context.Context, pod *v1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return podworker.ErrStopped
	}
	e, known := p.entries[pod.UID]
	if !known {
		e = &entry{}
		p.entries[pod.UID] = e
		p.claimNameLocked(ctx, pod)
	}
	e.pod = pod
	if pod.DeletionTimestamp != nil {
		e.deleting = true
	}
	p.changedLocked()
	return nil
}

// claimNameLocked makes pod the holder of its name. A different UID that
// held it lost its API object (names are unique in the API server), so it
// is stopped as a pod whose grace period is over.
func (p *Provider) claimNameLocked(ctx context.Context, pod *v1.Pod) {
	key := podKey(pod)
	old, held := p.names[key]
	p.names[key] = pod.UID
	if !held || old == pod.UID {
		return
	}
	if oe := p.entries[old]; oe != nil {
		p.goneLocked(ctx, old, oe)
	}
}

// goneLocked records that e's API object no longer exists and stops it:
// it leaves the desired pods the source sends, and the engine is told at
// once (a runtime event, not a config change, so it does not wait for the
// sync loop) that it is a pod deleted with grace 0 (which the engine takes
// as 1 second), so the window reports it deleted and its grace shortens to
// 1 second, cancelling a longer stop in flight. (The sync loop's kill of a
// pod removed from config carries the pod's own, longer, grace period,
// which the engine ignores: grace periods only shorten.)
func (p *Provider) goneLocked(ctx context.Context, uid types.UID, e *entry) {
	e.gone, e.deleting = true, true
	pod := e.pod.DeepCopy()
	if pod.DeletionTimestamp == nil {
		now := metav1.NewTime(p.opts.Clock.Now())
		pod.DeletionTimestamp = &now
	}
	pod.DeletionGracePeriodSeconds = new(int64(0))
	e.pod = pod
	p.changedLocked()
	if err := p.workers.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodKill, Pod: pod}); err != nil && !errors.Is(err, podworker.ErrStopped) {
		// Housekeeping terminates it as an orphan if the engine is still up.
		p.opts.Logger.Error(err, "Stopping a pod whose API object is gone", "podUID", uid)
	}
}

// DeletePod asks the engine to stop the pod and returns at once; the final
// status is sent through NotifyPods once its containers have stopped, and
// its backend resources are released after that. It may be called any
// number of times.
//
// virtual-kubelet calls it in two situations, told apart by the deletion
// timestamp: with one, the API object still exists and the pod's
// deletionGracePeriodSeconds applies (it can only shorten a grace period
// already in force); without one, the API object is gone (force-deleted,
// or removed once its grace period ran out, or never known) and the pod
// is stopped with a grace period of 1 second. A UID the provider does not
// know is stopped in the backend all the same, as a backend-only pod.
func (p *Provider) DeletePod(ctx context.Context, pod *v1.Pod) error {
	if err := checkPod("DeletePod", pod); err != nil {
		return err
	}
	pod = pod.DeepCopy()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return podworker.ErrStopped
	}
	e := p.entries[pod.UID]
	switch {
	case e == nil && pod.DeletionTimestamp == nil:
		// Nothing of it is desired: it is a backend pod to stop, which only
		// the engine hears of.
		return p.workers.UpdatePod(ctx, podworker.UpdatePodOptions{
			UpdateType: podworker.SyncPodKill,
			RunningPod: &podworker.RuntimePod{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name},
		})
	case e == nil:
		p.entries[pod.UID] = &entry{pod: pod, deleting: true}
		p.claimNameLocked(ctx, pod)
	case pod.DeletionTimestamp == nil:
		p.goneLocked(ctx, pod.UID, e)
		return nil
	default:
		// Only the deletion is taken from pod: the spec the pod runs with is
		// the one recorded (CreatePod, UpdatePod); VK#938 reports
		// virtual-kubelet handing over a copy without one.
		next := e.pod.DeepCopy()
		next.DeletionTimestamp, next.DeletionGracePeriodSeconds = pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds
		e.pod, e.deleting = next, true
	}
	p.changedLocked()
	return nil
}

// apiHas reports whether the API server (as the lister sees it) still has
// the pod with this UID; without a lister, whether the provider was not
// told otherwise.
func (p *Provider) apiHas(pod *v1.Pod, e *entry) bool {
	if e != nil && e.gone {
		return false
	}
	if p.api == nil {
		return e != nil
	}
	got, err := p.api.Pods(pod.Namespace).Get(pod.Name)
	if err != nil {
		// Only NotFound is expected from a lister; anything else keeps
		// the pod (the safe answer: it is not torn down on a read error).
		return !apierrors.IsNotFound(err)
	}
	return got.UID == pod.UID
}
