package podworker

// HistogramMetric observes values, such as durations in seconds.
// Implementations must be safe for concurrent use and fast: the engine may
// call them while holding its lock.
type HistogramMetric interface {
	Observe(value float64)
}

// CounterMetric counts events. Same rules as HistogramMetric.
type CounterMetric interface {
	Inc()
}

// GaugeMetric tracks a number that goes up and down. Same rules as
// HistogramMetric.
type GaugeMetric interface {
	Inc()
	Dec()
}

// MetricsProvider makes the engine's metrics. Each method is called once per
// label value, from New, and its result kept for the engine's life. A nil
// metric returned by a provider is treated as a no-op. podkit imports no
// metrics library: adapt one (Prometheus, OpenTelemetry) by implementing
// this interface, as examples/ does.
type MetricsProvider interface {
	// NewSyncDurationMetric measures how long calls of the given hook
	// take, in seconds (the StatusSource read before it included).
	NewSyncDurationMetric(hook Hook) HistogramMetric
	// NewDispatchLatencyMetric measures, in seconds, the time from an
	// update's StartTime (or its UpdatePod call when StartTime is zero) to
	// the start of the hook that acted on it.
	NewDispatchLatencyMetric() HistogramMetric
	// NewRetriesMetric counts calls of the given hook that failed (and are
	// retried).
	NewRetriesMetric(hook Hook) CounterMetric
	// NewPanicsMetric counts hooks that panicked.
	NewPanicsMetric() CounterMetric
	// NewPodsMetric tracks how many workers are in the given stage
	// (StageNotStarted through StageFinished).
	NewPodsMetric(stage Stage) GaugeMetric
	// NewSlowHooksMetric counts hook calls that were still running
	// Options.SlowHookWarning after their context was cancelled (once per
	// call, however long it then runs).
	NewSlowHooksMetric() CounterMetric
}

type noopMetric struct{}

func (noopMetric) Observe(float64) {}
func (noopMetric) Inc()            {}
func (noopMetric) Dec()            {}

// metrics holds the engine's metrics, each non-nil.
type metrics struct {
	syncDuration [HookSyncTerminatingRuntimePod + 1]HistogramMetric
	retries      [HookSyncTerminatingRuntimePod + 1]CounterMetric
	dispatch     HistogramMetric
	panics       CounterMetric
	slowHooks    CounterMetric
	pods         [StageFinished + 1]GaugeMetric
}

func newMetrics(p MetricsProvider) *metrics {
	m := &metrics{dispatch: noopMetric{}, panics: noopMetric{}, slowHooks: noopMetric{}}
	for i := range m.syncDuration {
		m.syncDuration[i] = noopMetric{}
		m.retries[i] = noopMetric{}
	}
	for i := range m.pods {
		m.pods[i] = noopMetric{}
	}
	if p == nil {
		return m
	}
	for h := HookSyncPod; h <= HookSyncTerminatingRuntimePod; h++ {
		if d := p.NewSyncDurationMetric(h); d != nil {
			m.syncDuration[h] = d
		}
		if c := p.NewRetriesMetric(h); c != nil {
			m.retries[h] = c
		}
	}
	if h := p.NewDispatchLatencyMetric(); h != nil {
		m.dispatch = h
	}
	if c := p.NewPanicsMetric(); c != nil {
		m.panics = c
	}
	if c := p.NewSlowHooksMetric(); c != nil {
		m.slowHooks = c
	}
	for s := StageNotStarted; s <= StageFinished; s++ {
		if g := p.NewPodsMetric(s); g != nil {
			m.pods[s] = g
		}
	}
	return m
}

// moved records that one worker went from stage a to stage b.
func (m *metrics) moved(a, b Stage) {
	if a == b {
		return
	}
	if a != StageAbsent {
		m.pods[a].Dec()
	}
	if b != StageAbsent {
		m.pods[b].Inc()
	}
}
