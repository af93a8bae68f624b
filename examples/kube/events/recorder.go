package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/podkit/podkit/lifecycle/event"
)

// DefaultComponent is the source component of the events an
// Recorder records unless told otherwise: the kubelet's, so that
// filters written for kubelet nodes (source=kubelet) see a podkit node's
// events too.
const DefaultComponent = "kubelet"

// Options configure an Recorder. The zero value is valid.
type Options struct {
	// Component is the events' source component. Defaults to
	// DefaultComponent.
	Component string
	// Correlator sets how events are aggregated (similar events within ten
	// minutes become one, with a count) and rate-limited (a burst of 25
	// per object, then one every five minutes). The zero value is
	// client-go's defaults, the kubelet's.
	Correlator record.CorrelatorOptions
	// SinkAttempts is how many times an event is sent before it is given
	// up while the API server cannot be reached; an event the API server
	// refuses is given up at once. Defaults to 12, as client-go.
	SinkAttempts int
	// SinkRetryDelay is the wait between two attempts. Defaults to 10
	// seconds, as client-go.
	SinkRetryDelay time.Duration
	// SinkTimeout bounds each attempt, so an API server that never answers
	// costs an attempt, not the queue. Defaults to 30 seconds.
	SinkTimeout time.Duration
	// Logger receives events given up, at level 0, and events recorded, at
	// V(4). Defaults to the zero Logger, which discards.
	Logger logr.Logger
}

// Recorder records Kubernetes events about pods and a node the way
// the kubelet does: through client-go's event broadcaster, which queues
// them without blocking, aggregates similar ones and rate-limits each
// object's (Options.Correlator), and sends them, under the
// client's identity, to the core/v1 events API. A node identity may create
// and patch events (the Node authorizer's rules allow it).
//
// Recording never blocks and never fails: when the queue (1,000 events) is
// full, or the API server keeps failing, events are dropped. A node agent
// loses events, never pods, to a broken event sink.
//
// It is an event.Recorder: the Recorder of a lifecycle.Agent (its sync
// loop and config merge) and of podconfig.ManifestSource. Create
// it with New and run it with Run (or, if it will not run,
// release it with Close); events recorded before Run are queued. Safe for
// concurrent use.
type Recorder struct {
	events corev1client.EventsGetter
	opts   Options

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorderLogger
	watcher     watch.Interface

	mu  sync.Mutex
	ran bool
	// shutdown shuts the broadcaster down, once.
	shutdown sync.Once
}

var _ event.Recorder = (*Recorder)(nil)

// New returns an Recorder that sends events through
// events (usually clientset.CoreV1()) as the source component on host
// nodeName. It starts the broadcaster's queue; call Run to send what it
// holds and to release it, or Close to release it unsent. An error says
// which argument or option is invalid.
func New(events corev1client.EventsGetter, nodeName string, opts Options) (*Recorder, error) {
	switch {
	case events == nil:
		return nil, errors.New("events: New needs an events client")
	case nodeName == "":
		return nil, errors.New("events: New needs a node name")
	case opts.SinkAttempts < 0 || opts.SinkRetryDelay < 0 || opts.SinkTimeout < 0:
		return nil, errors.New("events: Options: negative SinkAttempts, SinkRetryDelay or SinkTimeout")
	}
	if opts.SinkTimeout == 0 {
		opts.SinkTimeout = 30 * time.Second
	}
	if opts.Component == "" {
		opts.Component = DefaultComponent
	}
	if opts.SinkAttempts == 0 {
		opts.SinkAttempts = 12
	}
	if opts.SinkRetryDelay == 0 {
		opts.SinkRetryDelay = 10 * time.Second
	}
	b := record.NewBroadcaster(record.WithCorrelatorOptions(opts.Correlator))
	// The broadcaster's own sink goroutines cannot be waited for; a watch
	// of it (its watch.Broadcaster) is drained by Run instead.
	watchable, ok := b.(interface {
		Watch() (watch.Interface, error)
	})
	if !ok {
		b.Shutdown()
		return nil, errors.New("events: client-go's event broadcaster cannot be watched")
	}
	w, err := watchable.Watch()
	if err != nil {
		b.Shutdown()
		return nil, fmt.Errorf("events: starting the event broadcaster: %w", err)
	}
	return &Recorder{
		events:      events,
		opts:        opts,
		broadcaster: b,
		recorder:    b.NewRecorder(scheme.Scheme, v1.EventSource{Component: opts.Component, Host: nodeName}).WithLogger(opts.Logger),
		watcher:     w,
	}, nil
}

// Eventf records an event about object: a pod (its reference is taken from
// it), a *v1.ObjectReference (ContainerRef, NodeRef), or any object of the
// client-go scheme. eventType is v1.EventTypeNormal or
// v1.EventTypeWarning; reason is a short UpperCamelCase word. It never
// blocks. After Run has returned the event is dropped.
func (r *Recorder) Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any) {
	r.recorder.Eventf(object, eventType, reason, messageFmt, args...)
}

// Run sends the recorded events until ctx ends, then shuts the broadcaster
// down (later events are dropped) and returns nil once its goroutines have
// returned; an event being sent is abandoned. Call it once, from a
// goroutine of its own.
//
// Each event goes through client-go's correlator (aggregation, rate
// limits), then is created, or patched when it aggregates one sent before.
// An event the API server refuses is dropped; one it cannot take (no
// connection, a timeout) is tried again SinkAttempts times, SinkRetryDelay
// apart, while later events wait in the queue (dropped once it is full).
func (r *Recorder) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.ran {
		r.mu.Unlock()
		return errors.New("events: Recorder.Run called twice")
	}
	r.ran = true
	r.mu.Unlock()
	defer r.Close()

	correlator := record.NewEventCorrelatorWithOptions(r.opts.Correlator)
	for {
		select {
		case <-ctx.Done():
			return nil
		case wev, ok := <-r.watcher.ResultChan():
			if !ok {
				return nil
			}
			if ev, ok := wev.Object.(*v1.Event); ok && ctx.Err() == nil {
				r.send(ctx, correlator, ev)
			}
		}
	}
}

// Close shuts the broadcaster down: events recorded from then on are
// dropped, and a Run that was never called can no longer be. An agent that
// fails before it runs the recorder calls it to release the broadcaster's
// goroutine. It is idempotent, and safe to call during and after Run.
func (r *Recorder) Close() {
	r.shutdown.Do(func() {
		r.watcher.Stop()
		r.broadcaster.Shutdown()
	})
}

// send correlates ev and writes it to the API server, trying again while
// the failure is one that may pass.
func (r *Recorder) send(ctx context.Context, correlator *record.EventCorrelator, ev *v1.Event) {
	ev = ev.DeepCopy()
	result, err := correlator.EventCorrelate(ev)
	if err != nil {
		r.opts.Logger.Error(err, "Correlating an event failed")
	}
	if result == nil || result.Skip {
		return
	}
	logger := r.opts.Logger.WithValues("object", ev.InvolvedObject.Namespace+"/"+ev.InvolvedObject.Name, "reason", ev.Reason)
	for attempt := 1; ctx.Err() == nil; attempt++ {
		attemptCtx, cancel := context.WithTimeout(ctx, r.opts.SinkTimeout)
		stored, err := r.write(attemptCtx, result.Event, result.Patch)
		cancel()
		if err == nil {
			correlator.UpdateState(stored)
			logger.V(4).Info("Recorded event", "count", stored.Count)
			return
		}
		var status apierrors.APIStatus
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &status) && !isTransient(err):
			logger.Error(err, "The API server refused an event; dropping it")
			return
		case attempt >= r.opts.SinkAttempts:
			logger.Error(err, "Writing an event failed; dropping it", "attempts", attempt)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.opts.SinkRetryDelay):
		}
	}
}

// isTransient reports whether an API error may pass when tried again.
func isTransient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}

// write creates ev, or patches the event it aggregates when patch is set
// (creating it if that one is gone).
func (r *Recorder) write(ctx context.Context, ev *v1.Event, patch []byte) (*v1.Event, error) {
	events := r.events.Events(ev.Namespace)
	if ev.Count > 1 && len(patch) > 0 {
		stored, err := events.Patch(ctx, ev.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			return stored, err
		}
	}
	create := ev.DeepCopy()
	create.ResourceVersion = ""
	return events.Create(ctx, create, metav1.CreateOptions{})
}
