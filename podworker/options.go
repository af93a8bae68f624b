package podworker

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// Options configure PodWorkers. The zero value is valid: every field says
// what it defaults to.
type Options[T any] struct {
	// Status gives the hooks the pod's runtime status. Defaults to none:
	// hooks get the zero T. If it also implements StoppedChecker, pods first
	// seen in a terminal phase may skip SyncTerminatingPod.
	Status StatusSource[T]
	// MaxConcurrentSyncs caps how many hooks run at once, across all pods.
	// When the cap is reached, waiting termination work runs before waiting
	// setup work. Defaults to 0: no cap, as in the kubelet. Negative is an
	// error.
	MaxConcurrentSyncs int
	// ResyncInterval is how long after a successful SyncPod the engine calls
	// SyncPod again (as SyncPodSync), lengthened by a random jitter of up to
	// 50%. Defaults to one minute. A negative value disables resyncs; one
	// above MaxDelay is an error.
	ResyncInterval time.Duration
	// BackOff is the first delay after a failed hook; each further failure
	// of the same pod doubles it, up to MaxBackOff. Each delay is lengthened
	// by a random jitter of up to 50%. A success resets it. Defaults to one
	// second. Negative, or above MaxDelay, is an error.
	BackOff time.Duration
	// MaxBackOff caps the backoff, and the delay a hook's RetryAfter error
	// asks for. Defaults to two minutes, or BackOff when that is larger. It
	// must not be below BackOff; negative, or above MaxDelay, is an error.
	MaxBackOff time.Duration
	// Clock is the source of all time and timers. Defaults to the real
	// clock; tests use k8s.io/utils/clock/testing or testing/synctest.
	Clock clock.WithTicker
	// Logger receives the engine's logs: errors and panics at level 0,
	// per-pod detail at V(4) and above. Defaults to the zero Logger, which
	// discards. Each hook's ctx carries it (logr.FromContext) with the pod's
	// UID and full name.
	Logger logr.Logger
	// Metrics makes the engine's metrics. Defaults to none (no-ops).
	Metrics MetricsProvider
	// SlowHookWarning is how long a hook may keep running after its
	// context was cancelled (its pod's termination started, its grace
	// period shortened, or Run shuts down) before the engine logs it, at
	// level 0 with the pod's UID, full name and the hook's name, and again
	// every SlowHookWarning while it runs on; each such hook call is
	// counted once by MetricsProvider.NewSlowHooksMetric. While Run shuts
	// down, it logs at the same pace which hooks it still waits for.
	// Defaults to one minute; a negative value turns the warnings off; one
	// above MaxDelay is an error.
	SlowHookWarning time.Duration
}

// MaxDelay is the longest delay the engine schedules: New refuses a
// ResyncInterval, BackOff, MaxBackOff or SlowHookWarning above it, and a
// hook's RetryAfter delay is cut to MaxBackOff, so to MaxDelay at most. It
// is MaxGracePeriodSeconds seconds, about 100 years: longer than any agent
// runs, and short enough that a delay, jittered up by half and added to any
// reading of the clock, never overflows a time.Duration (an overflow would
// make the delay negative, and the pod's hooks run in a busy loop).
const MaxDelay = time.Duration(MaxGracePeriodSeconds) * time.Second

const (
	defaultResyncInterval = time.Minute
	defaultBackOff        = time.Second
	defaultMaxBackOff     = 2 * time.Minute
	defaultSlowHook       = time.Minute
)

// complete checks o and fills in its defaults. o is the caller's copy.
func (o *Options[T]) complete() error {
	if o.MaxConcurrentSyncs < 0 {
		return fmt.Errorf("podworker: MaxConcurrentSyncs is %d; want 0 (no cap) or more", o.MaxConcurrentSyncs)
	}
	if o.BackOff < 0 {
		return fmt.Errorf("podworker: BackOff is %v; want 0 (default) or more", o.BackOff)
	}
	if o.MaxBackOff < 0 {
		return fmt.Errorf("podworker: MaxBackOff is %v; want 0 (default) or more", o.MaxBackOff)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"ResyncInterval", o.ResyncInterval}, {"BackOff", o.BackOff}, {"MaxBackOff", o.MaxBackOff}, {"SlowHookWarning", o.SlowHookWarning}} {
		if f.d > MaxDelay {
			return fmt.Errorf("podworker: %s is %v; want at most MaxDelay (%v)", f.name, f.d, MaxDelay)
		}
	}
	if o.BackOff != 0 && o.MaxBackOff != 0 && o.MaxBackOff < o.BackOff {
		return fmt.Errorf("podworker: MaxBackOff %v is below BackOff %v", o.MaxBackOff, o.BackOff)
	}
	if o.ResyncInterval == 0 {
		o.ResyncInterval = defaultResyncInterval
	}
	if o.BackOff == 0 {
		o.BackOff = defaultBackOff
	}
	if o.MaxBackOff == 0 {
		o.MaxBackOff = max(defaultMaxBackOff, o.BackOff)
	}
	if o.SlowHookWarning == 0 {
		o.SlowHookWarning = defaultSlowHook
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return nil
}
