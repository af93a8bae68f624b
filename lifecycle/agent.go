package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/event"
	"github.com/podkit/podkit/lifecycle/nodeshutdown"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/podmanager"
	"github.com/podkit/podkit/podworker"
)

// AgentOptions configure an Agent. The zero value is valid: every field
// says what it defaults to. Logger, Recorder and Clock are the defaults of
// the parts' own fields, so an agent usually sets only those three and
// what is particular to it.
type AgentOptions[T any] struct {
	// Workers configure the pod workers the Agent builds (podworker.New):
	// the StatusSource, resync and backoff, the concurrency cap, metrics.
	// Their Logger defaults to Logger.WithName("podworker"), their Clock
	// to Clock.
	Workers podworker.Options[T]
	// SyncLoop configures the sync loop: admission, OnReject, the mirror
	// pod client, the runtime pod lister, the housekeeping interval. Its
	// Sources are waited for besides the sources the Agent runs
	// (AddSource); list there the sources an agent feeds through Config
	// itself. The Agent puts its node shutdown manager before the
	// AdmitHandlers. Its Logger defaults to Logger.WithName("lifecycle"),
	// its Recorder to Recorder, its Clock to Clock.
	SyncLoop SyncLoopOptions
	// Config configures the merge of the sources' snapshots. Its Logger
	// defaults to Logger.WithName("config"), its Recorder to Recorder,
	// its Clock to Clock.
	Config podconfig.Options
	// Logger is the agent's logger: the parts log under names of their
	// own (see above), and the Agent logs its runnables' failures and its
	// start and stop at level 0. Defaults to the zero Logger, which
	// discards.
	Logger logr.Logger
	// Recorder receives the events of the sync loop and of the config
	// merge, unless those set their own, and is what Agent.Recorder hands
	// to per-pod loops. Defaults to event.Discard.
	Recorder event.Recorder
	// Clock is the time of every part that does not set its own. Defaults
	// to the real clock.
	Clock clock.WithTicker
	// Features, when set, make NewAgent build the per-pod features (probes,
	// container hooks, the active deadline, environments, volumes) over
	// the agent's window, RequestSync, Recorder, Clock and Logger, and add
	// their loops, so that the runtime only uses them (Agent.Features).
	// Defaults to none: Features returns nil.
	Features *PodFeatureOptions
}

// Agent is a whole node agent's pod lifecycle, assembled once: the
// desired pod store (a podmanager.Manager), the pod workers over the
// embedder's PodSyncer, the merge of the config sources (a
// podconfig.Config), the sync loop (a SyncLoop, with admission and
// housekeeping), the node shutdown manager, and the loops the embedder adds:
// config sources (AddSource) and other loops (Add), per-pod loops among
// them. Run runs them all and stops them all. controller-runtime's Manager
// is the model.
//
// Create it with NewAgent; add sources and loops; then call Run once. The
// accessors may be called at any time from any goroutine.
type Agent[T any] struct {
	workers  *podworker.PodWorkers[T]
	store    *podmanager.Manager
	config   *podconfig.Config
	loop     *SyncLoop
	shutdown *nodeshutdown.Manager
	recorder event.Recorder
	log      logr.Logger
	// features are the per-pod features; nil without
	// AgentOptions.Features.
	features *PodFeatures

	// mu guards the fields below.
	mu sync.Mutex
	// sources and runnables are what Run runs, in the order added.
	sources   []podconfig.Source
	runnables []namedRunnable
	// names holds the names taken by sources and runnables.
	names map[string]struct{}
	// started is set by Run: nothing may be added from then on.
	started bool
}

// namedRunnable is a Runnable with the name it was added under.
type namedRunnable struct {
	name string
	r    Runnable
}

// NewAgent builds an Agent over syncer, the embedder's hooks: the pod
// workers (podworker.New with opts.Workers), a podmanager.Manager, a
// podconfig.Config, a nodeshutdown.Manager and the SyncLoop over them.
// It starts nothing: Run does. It returns an error, prefixed
// "lifecycle: ", for a nil syncer or an invalid option (the part's own
// message says which).
func NewAgent[T any](syncer podworker.PodSyncer[T], opts AgentOptions[T]) (*Agent[T], error) {
	if syncer == nil {
		return nil, errors.New("lifecycle: NewAgent needs a PodSyncer, got nil")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	recorder := event.OrDiscard(opts.Recorder)
	named := func(l logr.Logger, name string) logr.Logger {
		if l.GetSink() != nil {
			return l
		}
		return opts.Logger.WithName(name)
	}

	wo := opts.Workers
	wo.Logger = named(wo.Logger, "podworker")
	if wo.Clock == nil {
		wo.Clock = opts.Clock
	}
	workers, err := podworker.New(syncer, wo)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: NewAgent: %w", err)
	}

	co := opts.Config
	co.Logger = named(co.Logger, "config")
	if co.Recorder == nil {
		co.Recorder = recorder
	}
	if co.Clock == nil {
		co.Clock = opts.Clock
	}
	config, err := podconfig.New(co)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: NewAgent: %w", err)
	}

	lo := opts.SyncLoop
	lo.Logger = named(lo.Logger, "lifecycle")
	if lo.Recorder == nil {
		lo.Recorder = recorder
	}
	if lo.Clock == nil {
		lo.Clock = opts.Clock
	}
	shutdown, err := nodeshutdown.New(workers, nodeshutdown.Options{Logger: named(logr.Logger{}, "nodeshutdown"), Clock: lo.Clock})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: NewAgent: %w", err)
	}
	lo.AdmitHandlers = slices.Concat([]admission.Handler{shutdown}, lo.AdmitHandlers)
	store := podmanager.New()
	loop, err := NewSyncLoop(workers, store, lo)
	if err != nil {
		return nil, err
	}
	a := &Agent[T]{
		workers:  workers,
		store:    store,
		config:   config,
		loop:     loop,
		shutdown: shutdown,
		recorder: recorder,
		log:      opts.Logger,
		names:    map[string]struct{}{},
	}
	if opts.Features != nil {
		if a.features, err = a.newPodFeatures(*opts.Features, workers, recorder, opts.Clock, opts.Logger); err != nil {
			return nil, fmt.Errorf("lifecycle: NewAgent: %w", err)
		}
		if err := a.addFeatureLoops(a.features); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// AddSource makes src one of the agent's config sources: Run runs it,
// sending its snapshots to Config, and the sync loop waits for its first
// snapshot before it acts on the absence of a pod (no removal is killed,
// no housekeeping runs, so nothing is taken for an orphan before every
// source has delivered its pods, as in the kubelet). Its name
// (src.Source()) must be new to the agent. It returns an error, prefixed
// "lifecycle: ", for a nil source, an empty or taken name, or a call after
// Run started. Call it from any goroutine.
func (a *Agent[T]) AddSource(src podconfig.Source) error {
	if src == nil {
		return errors.New("lifecycle: AddSource needs a source, got nil")
	}
	name := src.Source()
	if err := a.claim("source", name); err != nil {
		return err
	}
	a.loop.requireSource(name)
	a.mu.Lock()
	a.sources = append(a.sources, src)
	a.mu.Unlock()
	return nil
}

// Add makes r one of the agent's loops, under name (which errors and logs
// use): Run starts it with the others, and stops it after the sync loop
// and the pod workers have stopped, so that what their last hooks report
// (events, statuses) still gets out. A per-pod loop (probes, container
// hooks, the active deadline, volumes) is built from the agent's Workers
// (the window, by UID), RequestSync and Recorder, and added here; if it
// implements PodObserver (a PodLoop does) it is also told of pods by the
// sync loop.
//
// It returns an error, prefixed "lifecycle: ", for a nil runnable, an empty
// or taken name, or a call after Run started. Call it from any goroutine.
func (a *Agent[T]) Add(name string, r Runnable) error {
	if r == nil {
		return fmt.Errorf("lifecycle: Add(%q) needs a runnable, got nil", name)
	}
	if err := a.claim("runnable", name); err != nil {
		return err
	}
	if o, ok := r.(PodObserver); ok {
		a.loop.addObserver(o)
	}
	a.mu.Lock()
	a.runnables = append(a.runnables, namedRunnable{name: name, r: r})
	a.mu.Unlock()
	return nil
}

// claim takes name for a source or runnable (what), before Run.
func (a *Agent[T]) claim(what, name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch _, taken := a.names[name]; {
	case a.started:
		return fmt.Errorf("lifecycle: cannot add %s %q: the agent already runs", what, name)
	case name == "":
		return fmt.Errorf("lifecycle: a %s needs a name, got \"\"", what)
	case taken:
		return fmt.Errorf("lifecycle: the agent already has a source or runnable named %q", name)
	}
	a.names[name] = struct{}{}
	return nil
}

// RequestSync is the agent's one way in for runtime events (a container
// exited, a probe result changed, a volume was updated): it asks for the
// pod's current hook to run again soon with the newest desired state, as
// the kubelet's PLEG does (podworker.PodWorkers.Resync). It never blocks,
// may be called from any goroutine (a hook, a runtime callback, a per-pod
// loop), and coalesces: many requests before the hook runs make one run.
// A UID the workers do not know (a pod admission rejected, a mirror pod's,
// one already finished), and every UID once Run has returned, is a no-op.
func (a *Agent[T]) RequestSync(uid types.UID) { a.workers.Resync(uid) }

// Workers returns the pod workers: their window (by UID), snapshots,
// transitions and waits are what every other loop of the agent asks. Send
// config changes through the sources, never to the workers directly.
func (a *Agent[T]) Workers() *podworker.PodWorkers[T] { return a.workers }

// Store returns the desired pods, as the sync loop recorded them. Read it;
// the sync loop is its only writer.
func (a *Agent[T]) Store() *podmanager.Manager { return a.store }

// Config returns the merge of the sources' snapshots, for a source an
// agent feeds itself (SetPods, under a name listed in
// AgentOptions.SyncLoop.Sources).
func (a *Agent[T]) Config() *podconfig.Config { return a.config }

// SyncLoop returns the sync loop, for SourcesReady, GetActivePods and an
// extra Housekeeping pass (after a node shutdown, say).
func (a *Agent[T]) SyncLoop() *SyncLoop { return a.loop }

// NodeShutdown returns the node shutdown manager: its Shutdown stops the
// node's pods within a budget, and from then on the sync loop admits no
// pod.
func (a *Agent[T]) NodeShutdown() *nodeshutdown.Manager { return a.shutdown }

// Recorder returns the agent's event recorder (AgentOptions.Recorder, or
// event.Discard), for the loops an embedder builds around it.
func (a *Agent[T]) Recorder() event.Recorder { return a.recorder }
