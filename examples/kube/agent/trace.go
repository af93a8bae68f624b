package agent

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podkit/podkit/examples/kube/statuswriter"
	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/podworker"
)

// The kubelet's defaults for its API client (--kube-api-qps,
// --kube-api-burst): the budget every request of a node shares, status
// writes included.
const (
	DefaultClientQPS   = 50
	DefaultClientBurst = 100
)

// NewClient returns a clientset for cfg with the kubelet's client rate
// limits where cfg sets none: QPS DefaultClientQPS and burst
// DefaultClientBurst rather than client-go's 5 and 10, under which 30 pods'
// status writes alone take seconds. cfg is not modified. An error is
// client-go's, for a configuration it cannot use.
func NewClient(cfg *rest.Config) (kubernetes.Interface, error) {
	if cfg == nil {
		return nil, fmt.Errorf("agent: NewClient needs a configuration")
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = DefaultClientQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultClientBurst
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return cs, nil
}

// eventClient is the client of the agent's events: Config.EventClient,
// else Config.Client.
func eventClient(cfg Config) kubernetes.Interface {
	if cfg.EventClient != nil {
		return cfg.EventClient
	}
	return cfg.Client
}

// TraceStage names a point in a pod's start that the agent reports to
// Config.Trace.
type TraceStage string

// The stages, in the order a pod passes them.
const (
	// TraceDelivered: the sync loop handed the pod to its worker (the API
	// server's watch delivered it, and it was admitted), or handed it a
	// newer version.
	TraceDelivered TraceStage = "delivered"
	// TraceSyncStarted and TraceSyncEnded: a SyncPod hook began, and
	// returned with the pod's status recorded for the writer.
	TraceSyncStarted TraceStage = "sync-started"
	TraceSyncEnded   TraceStage = "sync-ended"
	// TraceStatusRead, TraceStatusSent and TraceStatusWritten: the read of
	// the pod that a status patch of phase PodTrace.Phase was computed
	// from went to the API server (not reported for a patch that needed no
	// read), the patch went, and the API server accepted it (a refused
	// patch reports no TraceStatusWritten). All three are reported once
	// the patch was answered.
	TraceStatusRead    TraceStage = "status-read"
	TraceStatusSent    TraceStage = "status-sent"
	TraceStatusWritten TraceStage = "status-written"
)

// PodTrace is one point of a pod's start: which pod, where, when, and for
// the status stages the phase written.
type PodTrace struct {
	UID   types.UID
	Stage TraceStage
	Phase v1.PodPhase
	At    time.Time
	// Update is, for TraceSyncStarted and TraceSyncEnded, the SyncPod's
	// update type: why the pod was synced (create for its first, update for
	// a changed pod, sync for a resync or a runtime event).
	Update podworker.UpdateType
	// Err is, for TraceSyncEnded, the error the SyncPod returned (nil when
	// it succeeded): a pod whose first SyncPod failed waits for its retry.
	Err error
}

// TraceFunc receives the agent's PodTraces (Config.Trace). It is called
// from the sync loop, the pod workers and the status writer, concurrently,
// on their hot paths: it must return at once and never block (append to
// a slice under a mutex, say). A TraceFunc that panics is a bug of its
// own; the agent does not guard against it.
type TraceFunc func(PodTrace)

// tracedSyncer returns s with its SyncPod hook reported to trace, or s
// itself when trace is nil.
func tracedSyncer[T any](s podworker.PodSyncer[T], trace TraceFunc) podworker.PodSyncer[T] {
	if trace == nil {
		return s
	}
	return podworker.Decorate(s, podworker.PodSyncerFuncs[T]{
		SyncPodFunc: func(ctx context.Context, updateType podworker.UpdateType, pod, mirrorPod *v1.Pod, st T) (bool, error) {
			trace(PodTrace{UID: pod.UID, Stage: TraceSyncStarted, Update: updateType, At: time.Now()})
			terminal, err := s.SyncPod(ctx, updateType, pod, mirrorPod, st)
			trace(PodTrace{UID: pod.UID, Stage: TraceSyncEnded, Update: updateType, At: time.Now(), Err: err})
			return terminal, err
		},
	})
}

// traceLoop is the per-pod loop that reports each hand-over of a pod to
// its worker to trace.
func traceLoop(trace TraceFunc) lifecycle.Runnable {
	return lifecycle.PodLoop{
		Runnable: lifecycle.RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }),
		PodObserver: lifecycle.PodObserverFuncs{PodUpdatedFunc: func(pod *v1.Pod) {
			trace(PodTrace{UID: pod.UID, Stage: TraceDelivered, At: time.Now()})
		}},
	}
}

// writeTracer turns the status writer's write reports into PodTraces, or
// is nil when trace is.
func writeTracer(trace TraceFunc) func(statuswriter.WriteTrace) {
	if trace == nil {
		return nil
	}
	return func(w statuswriter.WriteTrace) {
		if !w.Read.IsZero() {
			trace(PodTrace{UID: w.UID, Stage: TraceStatusRead, Phase: w.Phase, At: w.Read})
		}
		trace(PodTrace{UID: w.UID, Stage: TraceStatusSent, Phase: w.Phase, At: w.Sent})
		if w.Err == nil {
			trace(PodTrace{UID: w.UID, Stage: TraceStatusWritten, Phase: w.Phase, At: w.Answered})
		}
	}
}
