package probe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
)

// TestWorkerDecisions replays outcomes through a worker and checks the
// decision after each, for the thresholds and hold rules of each type.
func TestWorkerDecisions(t *testing.T) {
	const S, F = resultSuccess, resultFailure
	for _, tc := range []struct {
		name             string
		typ              Type
		success, failure int
		outcomes         []result
		decisions        []result // the decision after each outcome
		changed          []bool
		onHold           bool // after the last outcome
	}{
		{"readiness starts failed and needs successThreshold successes", Readiness, 2, 3,
			[]result{S, S, S}, []result{F, S, S}, []bool{false, true, false}, false},
		{"readiness needs failureThreshold failures in a row", Readiness, 1, 3,
			[]result{S, F, F, S, F, F, F}, []result{S, S, S, S, S, S, F}, []bool{true, false, false, false, false, false, true}, false},
		{"liveness starts live and fails after the threshold, then holds", Liveness, 1, 2,
			[]result{F, S, F, F}, []result{S, S, S, F}, []bool{false, false, false, true}, true},
		{"startup decides on its first success and holds", Startup, 1, 3,
			[]result{F, S}, []result{resultUnknown, S}, []bool{false, true}, true},
		{"startup fails after the threshold and holds", Startup, 1, 2,
			[]result{F, F}, []result{resultUnknown, F}, []bool{false, true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorker(&v1.Container{Name: "c"}, tc.typ, &v1.Probe{}, settings{successThreshold: tc.success, failureThreshold: tc.failure}, nil)
			w.observe(instance{id: "c1", running: true}, resultUnknown)
			for i, o := range tc.outcomes {
				changed := w.record(o)
				assert.Equal(t, tc.decisions[i], w.result, "decision after outcome %d", i)
				assert.Equal(t, tc.changed[i], changed, "change at outcome %d", i)
			}
			assert.Equal(t, tc.onHold, w.onHold)
		})
	}
}

func TestWorkerNewRunResets(t *testing.T) {
	w := newWorker(&v1.Container{Name: "c"}, Readiness, &v1.Probe{}, settings{successThreshold: 1, failureThreshold: 3}, nil)
	at := t0
	assert.True(t, w.observe(instance{id: "c1", startedAt: at, running: true}, resultUnknown))
	w.record(resultSuccess)
	assert.Equal(t, resultSuccess, w.result)
	gen := w.gen
	assert.False(t, w.observe(instance{id: "c1", startedAt: at, running: true}, resultUnknown), "same run")
	assert.False(t, w.observe(instance{id: "c1", running: true}, resultUnknown), "a run reported without its start time is the same run")
	assert.Equal(t, gen, w.gen)
	assert.True(t, w.observe(instance{id: "c1", startedAt: at.Add(time.Second), running: true}, resultUnknown), "same ID, new start time: a new run")
	assert.Equal(t, resultFailure, w.result, "not ready again")
	assert.Equal(t, 0, w.run, "the streak starts over")
	w.record(resultSuccess)
	assert.True(t, w.observe(instance{id: "c2", running: true}, resultUnknown))
	assert.Equal(t, resultFailure, w.result)
	assert.NotEqual(t, gen, w.gen)

	w.record(resultSuccess)
	w.observe(instance{id: "c2"}, resultUnknown) // the same run, stopped
	assert.Equal(t, resultFailure, w.result, "a stopped container is not ready")
}

func TestWorkerDue(t *testing.T) {
	s := settings{initialDelay: 30 * time.Second, successThreshold: 1, failureThreshold: 1}
	for _, tc := range []struct {
		name    string
		typ     Type
		inst    *instance
		now     time.Duration // after t0
		started bool
		edit    func(w *worker)
		want    bool
	}{
		{"no run yet", Readiness, nil, time.Hour, true, nil, false},
		{"not running", Readiness, &instance{id: "c"}, time.Hour, true, nil, false},
		{"in its initial delay", Readiness, &instance{id: "c", running: true, startedAt: t0}, 29 * time.Second, true, nil, false},
		{"delay over", Readiness, &instance{id: "c", running: true, startedAt: t0}, 30 * time.Second, true, nil, true},
		{"unknown start time has no delay", Readiness, &instance{id: "c", running: true}, 0, true, nil, true},
		{"readiness waits for startup", Readiness, &instance{id: "c", running: true}, time.Hour, false, nil, false},
		{"liveness waits for startup", Liveness, &instance{id: "c", running: true}, time.Hour, false, nil, false},
		{"startup runs until started", Startup, &instance{id: "c", running: true}, time.Hour, false, nil, true},
		{"startup stops once started", Startup, &instance{id: "c", running: true}, time.Hour, true, nil, false},
		{"on hold", Liveness, &instance{id: "c", running: true}, time.Hour, true, func(w *worker) { w.onHold = true }, false},
		{"stopped", Readiness, &instance{id: "c", running: true}, time.Hour, true, func(w *worker) { w.stopped = true }, false},
		{"invalid", Readiness, &instance{id: "c", running: true}, time.Hour, true, func(w *worker) { w.invalid = assert.AnError }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorker(&v1.Container{Name: "c"}, tc.typ, &v1.Probe{}, s, nil)
			if tc.inst != nil {
				w.observe(*tc.inst, resultUnknown)
			}
			if tc.edit != nil {
				tc.edit(w)
			}
			assert.Equal(t, tc.want, w.due(t0.Add(tc.now), tc.started))
		})
	}
}

func TestWorkerStopAndSeed(t *testing.T) {
	w := newWorker(&v1.Container{Name: "c"}, Liveness, &v1.Probe{}, settings{successThreshold: 1, failureThreshold: 1}, nil)
	w.observe(instance{id: "c1", running: true}, resultUnknown)
	w.record(resultFailure)
	gen := w.gen
	w.stop()
	assert.Equal(t, resultSuccess, w.result, "a stopped liveness probe kills nothing")
	assert.NotEqual(t, gen, w.gen, "a check in flight is dropped")

	s := newWorker(&v1.Container{Name: "c"}, Startup, &v1.Probe{}, settings{successThreshold: 1, failureThreshold: 1}, nil)
	s.observe(instance{id: "c1", running: true}, resultSuccess)
	assert.Equal(t, resultSuccess, s.result)
	assert.True(t, s.onHold, "a startup probe seeded as passed does not run")
	s.forget()
	assert.False(t, s.hasInst)
	assert.Equal(t, resultUnknown, s.result)
}
