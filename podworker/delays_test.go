package podworker_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// The longest delays the engine accepts, and the longest a hook can ask
// for, are long waits: time passes and the hook is not called again. (A
// delay that overflowed the engine's clock arithmetic would be due at once,
// and the hook called in a busy loop.)
func TestHugeDelaysWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   podworker.Options[struct{}]
		result podworkertest.Result
	}{
		{"a RetryAfter of MaxInt64 is cut to MaxBackOff", podworker.Options[struct{}]{MaxBackOff: podworker.MaxDelay}, podworkertest.Result{Err: podworker.RetryAfter(errBoom, math.MaxInt64)}},
		{"a ResyncInterval of MaxDelay", podworker.Options[struct{}]{ResyncInterval: podworker.MaxDelay}, podworkertest.Result{}},
		{"a BackOff of MaxDelay", podworker.Options[struct{}]{BackOff: podworker.MaxDelay}, podworkertest.Result{Err: errBoom}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				r := startRig(t, tc.opts)
				// The engine has run a while: its clock no longer reads zero,
				// so an unchecked now+delay would overflow.
				time.Sleep(time.Minute)
				r.f.Always("p", podworker.HookSyncPod, tc.result)
				// A second call, should one come, is held: an engine that
				// spins stops there rather than keeping the bubble busy.
				first, second := r.hold("p", podworker.HookSyncPod), r.hold("p", podworker.HookSyncPod)
				first.Release()
				r.update(podworker.SyncPodCreate, mkPod("p"))
				r.settle()
				time.Sleep(time.Hour)
				r.settle()
				select {
				case <-second.Entered():
					t.Error("SyncPod was called again within the hour")
				default:
				}
				assert.Equal(t, 1, len(r.f.CallsFor("p")), "SyncPod ran once in an hour: %s", r.trace("p"))
				info := r.info("p")
				require.False(t, info.NextSyncTime.IsZero(), "the next sync is scheduled")
				assert.GreaterOrEqual(t, info.NextSyncTime.Sub(info.LastSyncTime), podworker.MaxDelay, "and it is MaxDelay away at least")
			})
		})
	}
}
