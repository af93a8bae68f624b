package podworker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/podworker"
)

// A CompletedCh handed to a second kill breaks the contract: the engine
// survives the second close and says so, naming the pod.
func TestReusedCompletedChIsReported(t *testing.T) {
	t.Run("across two pods", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			var logs logSink
			r := startRig(t, podworker.Options[struct{}]{Logger: logs.logger()})
			a, b := mkPod("a"), mkPod("b")
			r.started(a)
			r.started(b)
			ch := make(chan struct{})
			r.kill(a, &podworker.KillPodOptions{CompletedCh: ch})
			r.settle()
			requireClosed(t, ch)
			assert.Empty(t, logs.all("CompletedCh"), "a first close is the contract")

			r.kill(b, &podworker.KillPodOptions{CompletedCh: ch})
			r.settle()
			assert.Equal(t, "sync:create kill(30) terminated", r.trace("b"), "the engine carried on")
			lines := logs.all("CompletedCh was already closed")
			require.Len(t, lines, 1)
			assert.Contains(t, lines[0], `"podUID"="b"`)
			assert.Contains(t, lines[0], `"pod"="b_ns"`)
		})
	})
	t.Run("twice to one pod", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			var logs logSink
			r := startRig(t, podworker.Options[struct{}]{Logger: logs.logger()})
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			ch := make(chan struct{})
			r.kill(p, &podworker.KillPodOptions{CompletedCh: ch})
			r.entered(g)
			r.kill(p, &podworker.KillPodOptions{CompletedCh: ch})
			g.Release()
			r.settle()
			requireClosed(t, ch)
			lines := logs.all("CompletedCh was already closed")
			require.Len(t, lines, 1)
			assert.Contains(t, lines[0], `"podUID"="p"`)
		})
	})
	t.Run("closed by its owner", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			var logs logSink
			r := startRig(t, podworker.Options[struct{}]{Logger: logs.logger()})
			p := mkPod("p")
			r.started(p)
			g := r.hold("p", podworker.HookSyncTerminatingPod)
			ch := make(chan struct{})
			r.kill(p, &podworker.KillPodOptions{CompletedCh: ch})
			r.entered(g)
			close(ch)
			g.Release()
			r.settle()
			require.Len(t, logs.all("CompletedCh was already closed"), 1)
		})
	})
}
