package main

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// runtimeEvents takes the process runtime's events (Options.OnEvent): it
// records the runtime's view of the pod at once (so it is there before the
// engine's next transition), asks for a sync of a pod one of whose
// containers exited, as the kubelet's PLEG does (so restarts and
// completion are acted on at once rather than at the next resync), and
// queues the event for printing. As a lifecycle.Runnable it prints the
// queued events until the agent stops, and then those still queued.
type runtimeEvents struct {
	records *podRecords
	// print prints an event; requestSync is the agent's RequestSync. Both
	// are set before the runtime emits its first event.
	print       func(processruntime.Event)
	requestSync func(types.UID)

	mu     sync.Mutex
	queued []processruntime.Event
	// wake has a value when events are queued.
	wake chan struct{}
}

func newRuntimeEvents(records *podRecords) *runtimeEvents {
	return &runtimeEvents{records: records, wake: make(chan struct{}, 1)}
}

// add is the runtime's OnEvent. It never blocks.
func (q *runtimeEvents) add(ev processruntime.Event) {
	q.records.edit(ev.UID, func(r *podRecord) {
		r.runtime, r.hasRuntime = ev.Status, true
		if r.name == "" {
			r.name = ev.Namespace + "/" + ev.Name
		}
	})
	if ev.Type == processruntime.ContainerExited && q.requestSync != nil {
		q.requestSync(ev.UID)
	}
	q.mu.Lock()
	q.queued = append(q.queued, ev)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Run prints the queued events until ctx ends, then those still queued.
func (q *runtimeEvents) Run(ctx context.Context) error {
	for {
		stopping := false
		select {
		case <-q.wake:
		case <-ctx.Done():
			stopping = true
		}
		q.mu.Lock()
		evs := q.queued
		q.queued = nil
		q.mu.Unlock()
		for _, ev := range evs {
			q.print(ev)
		}
		if stopping {
			return nil
		}
	}
}
