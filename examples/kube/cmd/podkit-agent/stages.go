package main

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// The --stage-executable values that name no file.
const (
	// stagesAuto: podkit-stages beside the agent, if usable, else the
	// agent's own executable.
	stagesAuto = "auto"
	// stagesSelf: the agent's own executable.
	stagesSelf = "self"
)

// stageExecutable resolves --stage-executable to the runtime's
// StageExecutable ("" for the agent's own executable): auto finds
// podkit-stages beside the agent (processruntime.LocateStageExecutable)
// and, when one is there that the agent cannot use (another source, or
// others may change it), says so in the log and uses the agent's own; a
// path is checked as the runtime will (processruntime
// .CheckStageExecutable), an error. The hollow runtime runs no stages.
func stageExecutable(ctx context.Context, flagValue string, rt agent.Runtime, logger logr.Logger) (string, error) {
	if rt != agent.RuntimeProcess {
		return "", nil
	}
	switch flagValue {
	case stagesSelf, "":
		return "", nil
	case stagesAuto:
		path, err := processruntime.LocateStageExecutable(ctx)
		switch {
		case err != nil:
			logger.Error(err, "Not running the pods' sandbox stages and log shims from the podkit-stages beside the agent; they run the agent's own executable, at more CPU and memory per pod")
			return "", nil
		case path == "":
			logger.V(1).Info("No podkit-stages beside the agent: the pods' sandbox stages and log shims run the agent's own executable")
			return "", nil
		}
		logger.Info("The pods' sandbox stages and log shims run podkit-stages", "path", path)
		return path, nil
	}
	if err := processruntime.CheckStageExecutable(ctx, flagValue); err != nil {
		return "", fmt.Errorf("--stage-executable: %w", err)
	}
	return flagValue, nil
}
