package processruntime

import "time"

// stageTrace, when set, is told how long each step of a sandboxed
// container's start took (the package's benchmarks set it, before any
// runtime is opened; it must be safe for concurrent use). Nil otherwise.
var stageTrace func(stage string, took time.Duration)

// traceStage reports stage, begun at since, to stageTrace.
func traceStage(stage string, since time.Time) {
	if f := stageTrace; f != nil {
		f(stage, time.Since(since))
	}
}
