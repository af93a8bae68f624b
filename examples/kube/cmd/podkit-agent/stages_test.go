package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/kube/agent"
)

func TestStageExecutableFlag(t *testing.T) {
	ctx := context.Background()
	log := logr.Discard()

	// The test binary has no podkit-stages beside it: auto is the agent's
	// own executable, as self is.
	for _, v := range []string{stagesAuto, stagesSelf, ""} {
		got, err := stageExecutable(ctx, v, agent.RuntimeProcess, log)
		require.NoError(t, err, v)
		require.Empty(t, got, v)
	}

	// A path is checked now, not at the first pod.
	dir := t.TempDir()
	bogus := filepath.Join(dir, "podkit-stages")
	require.NoError(t, os.WriteFile(bogus, []byte("#!/bin/sh\necho 00\n"), 0o755))
	_, err := stageExecutable(ctx, bogus, agent.RuntimeProcess, log)
	require.ErrorContains(t, err, "--stage-executable: ")
	require.ErrorContains(t, err, "another source")
	_, err = stageExecutable(ctx, "podkit-stages", agent.RuntimeProcess, log)
	require.ErrorContains(t, err, "not an absolute path")

	// The hollow runtime runs no stages, whatever the flag.
	got, err := stageExecutable(ctx, bogus, agent.RuntimeHollow, log)
	require.NoError(t, err)
	require.Empty(t, got)
}
