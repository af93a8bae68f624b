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
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/mirror"
)

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
// desired pods in a PodStore, admits new pods, drives the
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
	workers   Workers
	store     PodStore
	admitters admission.Chain
	onReject  func(context.Context, *v1.Pod, v1.PodStatus)
	mirrors   mirror.MirrorPodClient
	runtime   RuntimePodLister
	sources   []string
	interval  time.Duration
	recorder  Recorder
	log       logr.Logger
	clock     clock.WithTicker

	// loop serializes the sync loop's work: Dispatch, Handle*,
	// Housekeeping. It is held while admission handlers, OnReject, the
	// RuntimePodLister and the MirrorClient run, which is why those must
	// not call back into these methods.
	loop sync.Mutex

	// rejected holds the desired pods admission rejected.
	rejected *rejectedSet

	// mu guards the fields below. It is never held while calling out.
	mu sync.Mutex
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
func NewHandler(workers Workers, store PodStore, opts Options) (*Handler, error) {
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
		workers:   workers,
		store:     store,
		admitters: admission.Chain(slices.Clone(opts.AdmitHandlers)),
		onReject:  opts.OnReject,
		mirrors:   opts.MirrorClient,
		runtime:   opts.RuntimePods,
		sources:   slices.Clone(opts.Sources),
		interval:  opts.HousekeepingInterval,
		recorder:  opts.Recorder,
		log:       opts.Logger,
		clock:     opts.Clock,
		rejected:  newRejectedSet(),
		seen:      map[string]struct{}{},
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
