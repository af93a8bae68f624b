package podworker

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/podkit/podkit/internal/jitter"
	"github.com/podkit/podkit/internal/timerheap"
)

// machine is the pod workers' state and every transition of it: the
// engine's pure core, in the manner of raft's RawNode. It starts no
// goroutine, takes no lock, calls no hook and no callback, and never sends
// on, receives from or closes a channel: the callers' CompletedChs it keeps
// are values it hands back, to be closed by the driver. Its one reading of
// anything it does not own is hookCtx.observed, an atomic load of whether
// a hook listened to a context (cancelHooks). It causes nothing outside
// itself: each call takes an *effects from its caller (the driver,
// PodWorkers) and
// fills it with what must happen — stage changes to publish, CompletedChs
// to close, hook contexts to cancel, slow hooks to report, workers to wake,
// the timer loop to wake — and the driver applies them, outside its lock
// where that is safe. The driver serializes calls; the machine reads time
// from the clock it was configured with, at most once per call.
//
// Work moves through three places: a record with something to do now is in
// a ready queue (termination work and setup work apart, so the driver can
// prefer termination); a record waiting for a retry or resync is in the
// delay heap; a record whose hook runs is in neither (fRunning) until
// complete.
//
// Its files: machine.go (state, configuration, time), machine_effects.go
// (the effects, and every helper that emits one: a walk through one call
// goes from the call's file to that one), machine_update.go (UpdatePod,
// Resync), machine_hooks.go (next, complete, timers), machine_static.go
// (static pod slots), machine_known.go (SyncKnownPods, shutdown),
// machine_window.go (the window and snapshots), and queue.go (the ready
// queues' lists). The driver's half of a call is in step.go.
type machine struct {
	cfg machineConfig

	records map[types.UID]*record
	// peak is the most records held since the map was last rebuilt: Go maps
	// never give memory back, so syncKnown rebuilds a map that shrank a lot.
	peak int
	// static maps a static pod's full name to who holds it and who waits.
	static map[string]*staticSlot
	// podsSynced is set by the first SyncKnownPods: from then on an unknown
	// UID is known not to run.
	podsSynced bool

	readyTerm, readySync list
	delayed              timerheap.Heap[*record]
	// bulk is set while syncKnown runs: records it forgets leave the delay
	// heap in one O(n) pass at its end (bulkRemoved counts them) rather
	// than one O(log n) removal each.
	bulk        bool
	bulkRemoved int
	// bulkForgotten counts the records syncKnown forgot, left in the map
	// until its end (dropForgotten).
	bulkForgotten int

	// epoch is the time tick 0 stands for; nowAt/nowSet cache the current
	// call's reading of the clock.
	epoch  time.Time
	nowAt  tick
	nowSet bool
}

// machineConfig is the machine's configuration, given once to newMachine.
type machineConfig struct {
	// clock is read at most once per call, and only when the call needs
	// the time (reading it is not free on every machine).
	clock clock.PassiveClock
	// resync, backOff and maxBackOff are Options' (resync <= 0: none).
	resync, backOff, maxBackOff time.Duration
	// slowWarning is how long a hook may run after its context was
	// cancelled before it is reported (0: never).
	slowWarning time.Duration
	// stampUpdates fills in an update's missing StartTime (latency metrics).
	stampUpdates bool
	// jitter spreads a retry or resync delay (jitter.Up by half, unless a
	// test wants the delays exact). It is a pure function of its argument
	// and a random draw.
	jitter func(time.Duration) time.Duration
}

func newMachine(cfg machineConfig) *machine {
	if cfg.jitter == nil {
		cfg.jitter = func(d time.Duration) time.Duration { return jitter.Up(d, 0.5) }
	}
	return &machine{
		cfg:       cfg,
		records:   map[types.UID]*record{},
		static:    map[string]*staticSlot{},
		readyTerm: list{kind: readyLink},
		readySync: list{kind: readyLink},
		epoch:     cfg.clock.Now(),
	}
}

// tick is a point in time as the machine keeps it: nanoseconds since its
// epoch (monotonic when the clock gives monotonic readings), 8 bytes where
// a time.Time takes 24.
type tick int64

// resetNow starts a call: the next now() reads the clock again.
func (m *machine) resetNow() { m.nowSet = false }

// now returns the time of the current call.
func (m *machine) now() tick {
	if !m.nowSet {
		m.nowAt, m.nowSet = m.ticks(m.cfg.clock.Now()), true
	}
	return m.nowAt
}

func (m *machine) ticks(t time.Time) tick { return tick(t.Sub(m.epoch)) }

// after returns the tick d after t, saturating at the largest tick: a delay
// the machine schedules never wraps around into the past (which would make
// it due at once, and a pod's hooks run in a busy loop). Options caps every
// delay at MaxDelay; this holds whatever the caller asks.
func (t tick) after(d time.Duration) tick {
	if d > 0 && t > math.MaxInt64-tick(d) {
		return math.MaxInt64
	}
	return t + tick(d)
}

// nowTime returns the time of the current call.
func (m *machine) nowTime() time.Time      { return m.timeOf(m.now()) }
func (m *machine) timeOf(t tick) time.Time { return m.epoch.Add(time.Duration(t)) }

// fullNameOf names the pod of a record the machine handed out in effects.
func (m *machine) fullNameOf(r *record) string { return r.fullNameOf() }
