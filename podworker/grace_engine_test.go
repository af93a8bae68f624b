package podworker_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/podworker"
)

// A pod asking for an absurdly long grace period gets MaxGracePeriodSeconds,
// whichever field asked, and the snapshot shows the clamped value: a syncer
// converting it to a time.Duration gets a century, not a negative duration
// that would kill its containers at once.
func TestHugeGracePeriodIsClamped(t *testing.T) {
	huge := []struct {
		name string
		kill func(r *rig)
	}{
		{"in the spec", func(r *rig) {
			p := mkPod("p")
			p.Spec.TerminationGracePeriodSeconds = i64(math.MaxInt64)
			r.started(p)
			r.kill(p, nil)
		}},
		{"as the deletion grace period", func(r *rig) {
			p := mkPod("p")
			r.started(p)
			r.update(podworker.SyncPodUpdate, deleted(p, i64(1e12)))
		}},
		{"as a kill's override", func(r *rig) {
			p := mkPod("p")
			r.started(p)
			r.kill(p, &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(math.MaxInt64)})
		}},
	}
	for _, tc := range huge {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				r := startRig(t, podworker.Options[struct{}]{})
				g := r.hold("p", podworker.HookSyncTerminatingPod)
				tc.kill(r)
				r.entered(g)
				calls := r.f.CallsFor("p")
				require.Len(t, calls, 2)
				assert.Equal(t, podworker.MaxGracePeriodSeconds, calls[1].GracePeriod)
				assert.Equal(t, podworker.MaxGracePeriodSeconds, r.info("p").GracePeriod)
				g.Release()
				r.settle()
			})
		})
	}
}

// One rule for grace periods below 1, whatever field carries them: they mean
// 1 and are never an error (the API server treats a negative
// terminationGracePeriodSeconds as 1 too).
func TestGracePeriodBelowOneMeansOne(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill func(r *rig)
	}{
		{"a negative spec grace", func(r *rig) {
			p := mkPod("p")
			p.Spec.TerminationGracePeriodSeconds = i64(-30)
			r.started(p)
			r.kill(p, nil)
		}},
		{"a negative deletion grace", func(r *rig) {
			p := mkPod("p")
			r.started(p)
			r.update(podworker.SyncPodUpdate, deleted(p, i64(-5)))
		}},
		{"a negative override", func(r *rig) {
			p := mkPod("p")
			r.started(p)
			r.kill(p, &podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(-5)})
		}},
		{"a negative override through KillPod", func(r *rig) {
			p := mkPod("p")
			r.started(p)
			require.NoError(r.t, r.w.KillPod(r.ctx, p, podworker.KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(math.MinInt64)}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				r := startRig(t, podworker.Options[struct{}]{})
				tc.kill(r)
				r.settle()
				assert.Equal(t, "sync:create kill(1) terminated", r.trace("p"))
				assert.Equal(t, int64(1), r.info("p").GracePeriod)
			})
		})
	}
}
