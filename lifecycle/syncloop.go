package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/mirror"
)

// DefaultHousekeepingInterval is how often Run runs Housekeeping when
// SyncLoopOptions.HousekeepingInterval is 0, the kubelet's period.
const DefaultHousekeepingInterval = 2 * time.Second

// SyncLoopOptions configure a SyncLoop. The zero value is valid: every
// field says what it defaults to.
type SyncLoopOptions struct {
	// AdmitHandlers decide, in order, whether a pod added from config (or
	// re-added by housekeeping) may run; the first rejection wins. Defaults
	// to none: every pod is admitted. A nil entry is an error. An Agent
	// puts its node shutdown manager first.
	AdmitHandlers []admission.Handler
	// OnReject is told of every pod admission rejects, with the status the
	// pod should now have: phase Failed, the rejection's reason, and the
	// message "Pod was rejected: " plus the rejection's message. An agent
	// with an API server writes that status there. It is called from the
	// sync loop's goroutine, after the event is recorded; it must not block
	// for long and must not call the SyncLoop's Handle*, Dispatch or
	// Housekeeping methods. The pod is shared: read it, do not modify it.
	// Defaults to nil: rejections are only logged and recorded as events.
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
	// update before the SyncLoop acts on the absence of a pod: until then
	// HandlePodRemoves does not kill and Run does not run housekeeping, so
	// pods a slow source has not yet sent are not taken for orphans.
	// Defaults to none: the SyncLoop is ready at once. An Agent adds the
	// name of every source it runs (Agent.AddSource) to these.
	Sources []string
	// HousekeepingInterval is how often Run runs Housekeeping. Defaults to
	// DefaultHousekeepingInterval; negative is an error.
	HousekeepingInterval time.Duration
	// Recorder receives events about pods: admission rejections, unusable
	// pods in an update (podconfig.ReasonFailedValidation), mirror pod
	// failures. It is called inside the sync loop's critical section (see
	// the package documentation). Defaults to event.Discard.
	Recorder event.Recorder
	// Logger receives the SyncLoop's logs: errors at level 0, each config
	// update at V(2), what happens to each pod at V(4). Defaults to the
	// zero Logger, which discards.
	Logger logr.Logger
	// Clock drives housekeeping and stamps the start time of each update.
	// Defaults to the real clock.
	Clock clock.WithTicker
}

// SyncLoop is a node agent's sync loop: it takes config updates, keeps the
// desired pods in a PodStore, admits new pods, drives the pod workers with
// UpdatePod, and runs housekeeping that closes the loop (SyncKnownPods,
// re-adding desired pods, killing orphans, keeping mirror pods in step).
// An Agent builds and runs one; see the package documentation.
//
// Create it with NewSyncLoop. Dispatch, the Handle* methods and
// Housekeeping are serialized with each other (they form the sync loop's
// critical section) and may be called from any goroutine; Run calls them
// from its own. GetActivePods and SourcesReady may be called at any time
// from any goroutine.
type SyncLoop struct {
	workers   Workers
	store     PodStore
	admitters admission.Chain
	onReject  func(context.Context, *v1.Pod, v1.PodStatus)
	mirrors   mirror.MirrorPodClient
	runtime   RuntimePodLister
	interval  time.Duration
	recorder  event.Recorder
	log       logr.Logger
	clock     clock.WithTicker

	// loop serializes the sync loop's work: Dispatch, Handle*,
	// Housekeeping. It is held while admission handlers, OnReject, the
	// RuntimePodLister, the MirrorClient and the PodObservers run, which
	// is why those must not call back into these methods.
	loop sync.Mutex

	// rejected holds the desired pods admission rejected.
	rejected *rejectedSet

	// observers are told of pods (PodObserver); set before Run, read under
	// loop. observed holds the UIDs they were told of and not yet told
	// are forgotten; guarded by loop.
	observers []PodObserver
	observed  map[types.UID]struct{}

	// mu guards the fields below. It is never held while calling out.
	mu sync.Mutex
	// sources are the sources SourcesReady waits for.
	sources []string
	// seen holds the sources that have delivered an update.
	seen map[string]struct{}
	// running is set by Run, which may be called once.
	running bool
}

// NewSyncLoop returns a SyncLoop over workers (the pod workers, normally a
// *podworker.PodWorkers[T]) and store (the desired pods, normally a
// *podmanager.Manager). It starts nothing: Run starts the workers and the
// loop. It returns an error, prefixed "lifecycle: ", for a nil workers or
// store and for invalid options.
func NewSyncLoop(workers Workers, store PodStore, opts SyncLoopOptions) (*SyncLoop, error) {
	if workers == nil {
		return nil, errors.New("lifecycle: NewSyncLoop needs the pod workers, got nil")
	}
	if store == nil {
		return nil, errors.New("lifecycle: NewSyncLoop needs a desired pod store, got nil")
	}
	for i, a := range opts.AdmitHandlers {
		if a == nil {
			return nil, fmt.Errorf("lifecycle: SyncLoopOptions.AdmitHandlers[%d] is nil", i)
		}
	}
	for i, s := range opts.Sources {
		if s == "" {
			return nil, fmt.Errorf("lifecycle: SyncLoopOptions.Sources[%d] is empty", i)
		}
	}
	if opts.HousekeepingInterval < 0 {
		return nil, fmt.Errorf("lifecycle: SyncLoopOptions.HousekeepingInterval is %v; want 0 (default) or more", opts.HousekeepingInterval)
	}
	if opts.HousekeepingInterval == 0 {
		opts.HousekeepingInterval = DefaultHousekeepingInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &SyncLoop{
		workers:   workers,
		store:     store,
		admitters: admission.Chain(slices.Clone(opts.AdmitHandlers)),
		onReject:  opts.OnReject,
		mirrors:   opts.MirrorClient,
		runtime:   opts.RuntimePods,
		interval:  opts.HousekeepingInterval,
		recorder:  event.OrDiscard(opts.Recorder),
		log:       opts.Logger,
		clock:     opts.Clock,
		rejected:  newRejectedSet(),
		observed:  map[types.UID]struct{}{},
		sources:   slices.Clone(opts.Sources),
		seen:      map[string]struct{}{},
	}, nil
}

// SourcesReady reports whether every source in SyncLoopOptions.Sources
// (and, in an Agent, every source it runs) has delivered at least one
// update through Dispatch (or Run). Safe to call from any goroutine.
func (l *SyncLoop) SourcesReady() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sources {
		if _, ok := l.seen[s]; !ok {
			return false
		}
	}
	return true
}

// requireSource adds name to the sources SourcesReady waits for. An Agent
// calls it for each source it runs, before Run.
func (l *SyncLoop) requireSource(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Contains(l.sources, name) {
		l.sources = append(l.sources, name)
	}
}

// addObserver makes o hear of pods. An Agent calls it before Run.
func (l *SyncLoop) addObserver(o PodObserver) {
	l.loop.Lock()
	defer l.loop.Unlock()
	l.observers = append(l.observers, o)
}
