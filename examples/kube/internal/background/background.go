// Package background runs a function on a goroutine of its own until it is
// told to stop: the way clustertest runs its nodes' agents and heartbeats,
// and podkit-controlplane its components.
package background

import "context"

// Task is a function running on a goroutine of its own. Its methods are
// safe for concurrent use.
type Task struct {
	cancel context.CancelFunc
	// done is closed when the function has returned, with err.
	done chan struct{}
	err  error
}

// Go runs run on a new goroutine with a context that Stop cancels, and
// returns at once.
func Go(run func(ctx context.Context) error) *Task {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Task{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		t.err = run(ctx)
	}()
	return t
}

// Done is closed once the function has returned.
func (t *Task) Done() <-chan struct{} { return t.done }

// Stopped says whether the function has returned, and with which error.
func (t *Task) Stopped() (bool, error) {
	select {
	case <-t.done:
		return true, t.err
	default:
		return false, nil
	}
}

// Stop cancels the function's context, waits for it to return, and
// returns its error.
func (t *Task) Stop() error {
	t.cancel()
	<-t.done
	return t.err
}
