package background_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/kube/internal/background"
)

// TestTask: a task runs until Stop cancels it, and Stop returns its error;
// one that returns on its own is seen as stopped, with its error.
func TestTask(t *testing.T) {
	started := make(chan struct{})
	task := background.Go(func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	<-started
	done, err := task.Stopped()
	assert.False(t, done)
	assert.NoError(t, err)
	require.ErrorIs(t, task.Stop(), context.Canceled)
	done, err = task.Stopped()
	assert.True(t, done)
	assert.ErrorIs(t, err, context.Canceled)

	boom := errors.New("boom")
	task = background.Go(func(context.Context) error { return boom })
	<-task.Done()
	done, err = task.Stopped()
	assert.True(t, done)
	assert.ErrorIs(t, err, boom)
	assert.ErrorIs(t, task.Stop(), boom, "Stop after the end returns the same error")
}
