package lifecycle

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// Runnable is a loop of an agent besides its sync loop and its config
// sources: a status writer, an event recorder, a node heartbeat, a kubelet
// API server, a per-pod loop (probes, container hooks, the active
// deadline, volumes). Agent.Add registers one and Agent.Run runs it.
type Runnable interface {
	// Run runs the loop until ctx ends, then returns once everything it
	// started has stopped: nil (or ctx's error) after ctx ended, another
	// error when the loop cannot go on, which stops the whole agent. A
	// Runnable that has nothing more to do may return nil early; the agent
	// goes on. Run is called once, on a goroutine of its own.
	Run(ctx context.Context) error
}

// RunnableFunc adapts a function to a Runnable.
type RunnableFunc func(ctx context.Context) error

// Run calls f.
func (f RunnableFunc) Run(ctx context.Context) error { return f(ctx) }

var _ Runnable = RunnableFunc(nil)

// PodObserver is an optional interface of a Runnable given to Agent.Add
// (or of anything given to the sync loop): a per-pod loop that keeps state
// by UID learns from it which pods there are, and asks the pod workers'
// window what each may do now, so that it keeps no idea of a pod's stage
// of its own.
//
// Both methods are called from the sync loop's goroutine, inside its
// critical section (see the package documentation): they must not block
// and must not call the SyncLoop's Handle*, Dispatch or Housekeeping
// methods. Agent.RequestSync and the workers' window are fine.
type PodObserver interface {
	// PodUpdated says the sync loop handed pod, the newest desired state of
	// its UID, to its worker: it was added (and admitted), changed, or
	// re-added by housekeeping. A pod being stopped is not announced
	// again: the window says so (IsPodTerminationRequested,
	// ShouldPodContainersBeTerminating). The pod is shared: read it, do not
	// modify it.
	PodUpdated(pod *v1.Pod)
	// PodForgotten says the pod workers have no worker for uid any more
	// (housekeeping found it gone: finished and no longer desired, or to
	// start over), after PodUpdated told of it; drop what is kept for it.
	// A UID that comes back is announced by PodUpdated again.
	PodForgotten(uid types.UID)
}

// PodObserverFuncs adapts functions to a PodObserver; a nil func does
// nothing.
type PodObserverFuncs struct {
	PodUpdatedFunc   func(pod *v1.Pod)
	PodForgottenFunc func(uid types.UID)
}

// PodUpdated calls PodUpdatedFunc, unless it is nil.
func (f PodObserverFuncs) PodUpdated(pod *v1.Pod) {
	if f.PodUpdatedFunc != nil {
		f.PodUpdatedFunc(pod)
	}
}

// PodForgotten calls PodForgottenFunc, unless it is nil.
func (f PodObserverFuncs) PodForgotten(uid types.UID) {
	if f.PodForgottenFunc != nil {
		f.PodForgottenFunc(uid)
	}
}

// PodLoop is a per-pod loop as Agent.Add takes one: a Runnable that is
// also a PodObserver. It lets a loop whose type has only some of the
// methods (a probe manager with Run and RemovePod, say) be added with what
// it has:
//
//	agent.Add("probes", lifecycle.PodLoop{
//		Runnable:    probes,
//		PodObserver: lifecycle.PodObserverFuncs{PodForgottenFunc: probes.RemovePod},
//	})
type PodLoop struct {
	Runnable
	PodObserver
}

var (
	_ PodObserver = PodObserverFuncs{}
	_ Runnable    = PodLoop{}
	_ PodObserver = PodLoop{}
)

// observeLocked tells the observers of pod. l.loop must be held.
func (l *SyncLoop) observeLocked(pod *v1.Pod) {
	if len(l.observers) == 0 {
		return
	}
	l.observed[pod.UID] = struct{}{}
	for _, o := range l.observers {
		o.PodUpdated(pod)
	}
}

// forgetUnknownLocked tells the observers of every pod they were told of
// that working (the workers' report, with the pods handed to them since)
// no longer has. l.loop must be held.
func (l *SyncLoop) forgetUnknownLocked(working map[types.UID]podworker.WorkerReport) {
	for uid := range l.observed {
		if _, ok := working[uid]; ok {
			continue
		}
		delete(l.observed, uid)
		for _, o := range l.observers {
			o.PodForgotten(uid)
		}
	}
}
