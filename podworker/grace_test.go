package podworker

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
)

// TestEffectiveGrace is the grace period calculation of SPEC §1.8 (upstream
// Test_calculateEffectiveGracePeriod) with decision D1: requests only ever
// shorten a grace period that is set, and 0 requested means 1.
func TestEffectiveGrace(t *testing.T) {
	p := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name                     string
		current                  int64 // 0: not set yet
		spec, deletion, override *int64
		want                     int64
		shortened                bool
	}{
		// Upstream's cases.
		{name: "the spec's grace when nothing is requested", spec: p(30), want: 30},
		{name: "the deletion grace when set", spec: p(30), deletion: p(5), want: 5},
		{name: "an override beats the deletion grace", spec: p(30), deletion: p(5), override: p(2), want: 2},
		{name: "a deletion grace of 0 means 1", spec: p(30), deletion: p(0), want: 1},
		{name: "an override of 0 means 1", spec: p(30), deletion: p(5), override: p(0), want: 1},
		// The rest of §1.8.
		{name: "no spec grace gives 1", want: 1},
		{name: "a spec grace of 0 gives 1", spec: p(0), want: 1},
		{name: "the shortest request wins, whatever its source", spec: p(30), deletion: p(2), override: p(5), want: 2},
		{name: "a first request longer than the spec is honoured", spec: p(30), deletion: p(60), want: 60},
		{name: "a first override longer than the spec is honoured", spec: p(30), override: p(45), want: 45},
		{name: "a negative override counts as 1", spec: p(30), override: p(-3), want: 1},
		{name: "a negative deletion grace counts as 1", spec: p(30), deletion: p(-3), want: 1},
		{name: "a negative spec grace counts as 1", spec: p(-30), want: 1},
		// MaxGracePeriodSeconds.
		{name: "a huge spec grace is clamped", spec: p(math.MaxInt64), want: MaxGracePeriodSeconds},
		{name: "a huge deletion grace is clamped", spec: p(30), deletion: p(1e12), want: MaxGracePeriodSeconds},
		{name: "a huge override is clamped", spec: p(30), override: p(math.MaxInt64), want: MaxGracePeriodSeconds},
		{name: "the most negative request counts as 1", deletion: p(math.MinInt64), want: 1},
		{name: "the spec does not apply once a grace is set", current: 10, spec: p(5), want: 10},
		// Decision D1.
		{name: "D1: a force delete then a longer override keeps 1", current: 1, override: p(5), want: 1},
		{name: "D1: a force delete and a longer override at once give 1", deletion: p(0), override: p(5), want: 1},
		{name: "D1: a longer deletion grace later is ignored", current: 10, deletion: p(20), want: 10},
		{name: "D1: an equal request does not shorten", current: 10, override: p(10), want: 10},
		{name: "D1: a shorter request shortens", current: 30, override: p(10), want: 10, shortened: true},
		{name: "D1: 0 requested later shortens to 1", current: 30, deletion: p(0), want: 1, shortened: true},
		{name: "D1: nothing is shorter than 1", current: 1, deletion: p(0), override: p(0), want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{}
			pod.Spec.TerminationGracePeriodSeconds = tc.spec
			pod.DeletionGracePeriodSeconds = tc.deletion
			got, shortened := effectiveGrace(tc.current, pod, tc.override)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.shortened, shortened)
		})
	}
	t.Run("without a pod (known only from the runtime) it is 1 or the override", func(t *testing.T) {
		got, _ := effectiveGrace(0, nil, nil)
		assert.Equal(t, int64(1), got)
		got, _ = effectiveGrace(0, nil, p(0))
		assert.Equal(t, int64(1), got)
	})
}

// TestMaxGracePeriodSecondsConvertsWithoutOverflow: the longest grace period
// the engine hands out is still a positive duration of many years, and stays
// one when a syncer doubles it.
func TestMaxGracePeriodSecondsConvertsWithoutOverflow(t *testing.T) {
	d := time.Duration(MaxGracePeriodSeconds) * time.Second
	assert.Greater(t, d, 99*365*24*time.Hour)
	assert.Greater(t, 2*d, d, "doubling it does not overflow")
	assert.Equal(t, MaxGracePeriodSeconds, int64(d/time.Second), "the conversion is exact")
}
