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
// Its files: machine.go (state, configuration, effects), machine_update.go
// (UpdatePod, Resync), machine_hooks.go (next, complete, timers),
// machine_static.go (static pod slots), machine_known.go (SyncKnownPods,
// forgetting, shutdown), machine_window.go (the window and snapshots), and
// queue.go (ready queues and the delay heap).
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

// effects are what one call of the machine asks the driver to do. The
// driver passes a zero effects, and applies it after the call.
type effects struct {
	// moves are the stage changes of the call, in order.
	moves smallBuf[move]
	// closes are the CompletedChs that must be closed now.
	closes smallBuf[closeReq]
	// cancels are the hook contexts that must be cancelled now.
	cancels smallBuf[*hookCtx]
	// slow are hooks still running after their context was cancelled.
	slow []slowHook
	// returned is the UID whose hook returned (complete), "" if none: its
	// snapshot changed even when its stage did not.
	returned types.UID
	// ready: a ready queue gained work; a worker should take it.
	ready bool
	// wake: the delay heap's first due time moved earlier; the timer loop
	// should look again.
	wake bool
	// quiet is set by the driver when nobody counts or watches stage
	// changes: moves are then not recorded.
	quiet bool
}

// move is one stage change of a worker.
type move struct {
	uid      types.UID
	rec      *record
	from, to Stage
}

// closeReq is one CompletedCh to close, and the pod it belongs to (to name
// it, should the channel already be closed).
type closeReq struct {
	ch  chan<- struct{}
	rec *record
}

// slowHook is a hook still running slowWarning (or a multiple of it) after
// its context was cancelled, for the driver to report.
type slowHook struct {
	uid      types.UID
	fullName string
	hook     Hook
	// cancelled is how long ago the hook's context was cancelled.
	cancelled time.Duration
	// first: this is the first report of this hook call.
	first bool
}

// smallBuf is an append-only list that keeps its first items inline, so
// that a call with few effects allocates nothing.
type smallBuf[T any] struct {
	n      int
	inline [2]T
	more   []T
}

func (b *smallBuf[T]) add(v T) {
	if b.n < len(b.inline) {
		b.inline[b.n] = v
	} else {
		b.more = append(b.more, v)
	}
	b.n++
}

func (b *smallBuf[T]) len() int { return b.n }

func (b *smallBuf[T]) at(i int) T {
	if i < len(b.inline) {
		return b.inline[i]
	}
	return b.more[i-len(b.inline)]
}

// moved records r's stage change from from, if it changed.
func (m *machine) moved(r *record, from Stage, fx *effects) {
	if fx.quiet {
		return
	}
	to := r.stage()
	if r.has(fForgotten) {
		to = StageAbsent
	}
	if from != to && !fx.quiet {
		fx.moves.add(move{uid: r.uid, rec: r, from: from, to: to})
	}
}

// fullNameOf names the pod of a record the machine handed out in effects.
func (m *machine) fullNameOf(r *record) string { return r.fullNameOf() }
