package processruntime

import "time"

// SetStageTrace sets the package's stage trace (see stageTrace); nil
// turns it off. Call it while no runtime runs.
func SetStageTrace(f func(stage string, took time.Duration)) { stageTrace = f }

// LocateStageExecutableBeside is LocateStageExecutable for a program at
// self rather than the running one.
var LocateStageExecutableBeside = locateBeside

// ReadV1Record returns the cgroup v1 directories the runtimes of a state
// directory recorded for their pods, by controller (none where there is
// no cgroup v1).
var ReadV1Record = readV1Record
