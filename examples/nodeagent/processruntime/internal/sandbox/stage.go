package sandbox

import (
	"fmt"
	"os"
)

// MarkerEnv is the environment variable that makes a program linking this
// package run one of the sandbox's stages instead of itself: the package's
// init runs the stage named by its value and exits, before the program's
// own main or TestMain. The stages are the agent's executable run again
// (/proc/self/exe), so they need no other file on the node.
const MarkerEnv = "PODKIT_SANDBOX_STAGE"

// The stages, the values of MarkerEnv.
const (
	// stageSpawner sets up the sandboxes a runtime asks for, each on a
	// thread of its own (Spawner).
	stageSpawner = "spawner"
	// stageInit is the pod's PID 1.
	stageInit = "init"
	// stageContainer applies a container's view and identity, then execs
	// its command.
	stageContainer = "container"
	// StageSourceDigest prints SourceDigest on standard output and exits:
	// how a runtime asks a stage program which source it was built from.
	StageSourceDigest = "source-digest"
)

// selfExe is what every stage runs: the running program itself.
const selfExe = "/proc/self/exe"

func init() {
	stage := os.Getenv(MarkerEnv)
	if stage == "" {
		return
	}
	var err error
	switch stage {
	case stageSpawner:
		err = spawnerMain()
	case stageInit:
		err = initMain()
	case stageContainer:
		err = containerMain()
	case StageSourceDigest:
		_, err = fmt.Println(SourceDigest())
	default:
		err = fmt.Errorf("unknown stage %q", stage)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "podkit sandbox %s: %v\n", stage, err)
		os.Exit(2)
	}
	os.Exit(0)
}
