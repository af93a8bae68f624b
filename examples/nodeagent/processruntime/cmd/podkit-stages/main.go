// Command podkit-stages runs the process runtime's sandbox stages and log
// shims, and nothing else: a small program for processruntime's
// Options.StageExecutable, so that each stage a pod's start runs (its
// setup, its init, each container's stage and log shim) is this program
// rather than the agent's own executable, whose start-up (the Go runtime
// and every package's init over a large binary) costs several times more
// CPU. The stages run from the linked packages' init functions, named by
// their environment; so do the answers to the runtime's check that this
// program was built from its own source of those packages
// (processruntime.CheckStageExecutable). Run any other way it says so and
// exits with status 2.
//
// Install it beside the agent, where processruntime.LocateStageExecutable
// (the example agent's --stage-executable auto) finds it:
//
//	cd examples/kube && go build -tags netgo,osusergo -o /usr/local/bin/ ./cmd/podkit-agent github.com/podkit/podkit/examples/nodeagent/processruntime/cmd/podkit-stages
package main

import (
	"fmt"
	"os"

	// Each runs its stage from its init, before main, when its marker
	// variable is set.
	_ "github.com/podkit/podkit/examples/nodeagent/processruntime/internal/logshim"
	_ "github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

func main() {
	fmt.Fprintln(os.Stderr, "podkit-stages: run by the process runtime only (Options.StageExecutable), for its sandbox stages and log shims")
	os.Exit(2)
}
