package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/podkit/podkit/lifecycle/podconfig"
)

// Run is the node agent's sync loop. It dispatches each update received
// from updates (Dispatch) and runs Housekeeping every
// SyncLoopOptions.HousekeepingInterval (on the injected clock) once the
// sources are ready, until ctx ends. A closed updates channel means no more config:
// Run keeps housekeeping until ctx ends.
//
// Run owns the pod workers' lifetime: it starts their Run first (so a
// loop whose updates reach no worker cannot happen), and when ctx ends it
// stops dispatching, cancels the workers' context, and returns only after
// their Run has returned, that is after every hook they started has
// returned. Do not run the workers yourself as well: if their Run returns
// while the loop still runs (a podworker.PodWorkers already running
// refuses a second Run at once), Run stops and returns an error wrapping
// theirs. An Agent calls Run; an agent with a loop of its own calls
// Dispatch and Housekeeping instead, and then runs the workers itself.
//
// Run may be called once; a second call returns an error at once. Call it
// from a goroutine of its own; everything it does happens there, so the
// SyncLoop's callbacks (admission handlers, OnReject, the RuntimePodLister,
// the MirrorClient) run on it. It returns nil when ctx ended.
func (l *SyncLoop) Run(ctx context.Context, updates <-chan podconfig.PodUpdate) error {
	l.mu.Lock()
	if l.running {
		l.mu.Unlock()
		return errors.New("lifecycle: SyncLoop.Run called twice")
	}
	l.running = true
	l.mu.Unlock()

	workersDone := make(chan error, 1)
	workersCtx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	go func() { workersDone <- l.workers.Run(workersCtx) }()

	ticker := l.clock.NewTicker(l.interval)
	defer ticker.Stop()
	l.log.Info("Starting the pod sync loop", "housekeepingInterval", l.interval)

	var loopErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-workersDone:
			loopErr = fmt.Errorf("lifecycle: the pod workers stopped while the sync loop ran: %w", errOrNil(err))
			workersDone = nil
			break loop
		case u, ok := <-updates:
			if !ok {
				l.log.V(2).Info("The config update channel was closed; housekeeping goes on")
				updates = nil
				continue
			}
			if err := l.Dispatch(ctx, u); err != nil {
				l.log.Error(err, "Dropping a config update")
			}
		case <-ticker.C():
			if !l.SourcesReady() {
				l.log.V(4).Info("Skipping housekeeping: the config sources are not all ready")
				continue
			}
			if err := l.Housekeeping(ctx); err != nil {
				l.log.Error(err, "Housekeeping failed")
			}
		}
	}

	l.log.Info("Stopping the pod sync loop")
	stopWorkers()
	if workersDone != nil {
		if err := <-workersDone; err != nil && loopErr == nil {
			loopErr = fmt.Errorf("lifecycle: the pod workers stopped with an error: %w", err)
		}
	}
	return loopErr
}

// errOrNil names a nil error, for a workers' Run that returned early
// without one.
func errOrNil(err error) error {
	if err == nil {
		return errors.New("their Run returned nil before the context ended")
	}
	return err
}
