package processruntime_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// script writes a shell script of body into dir as name, mode 0755, and
// returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

// privateDir is a temporary directory only its owner may write.
func privateDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

func TestCheckStageExecutable(t *testing.T) {
	ctx := context.Background()
	stages := buildStages(t, privateDir(t))
	require.NoError(t, processruntime.CheckStageExecutable(ctx, stages), "cmd/podkit-stages built from this source")

	t.Run("not this source", func(t *testing.T) {
		other := script(t, privateDir(t), "podkit-stages", "echo 0123456789abcdef")
		err := processruntime.CheckStageExecutable(ctx, other)
		require.ErrorContains(t, err, "was built from another source of the sandbox")
		_, err = processruntime.Open(processruntime.Options{StateDir: t.TempDir(), StageExecutable: other})
		require.ErrorContains(t, err, "was built from another source", "Open refuses it too")
	})
	t.Run("not a stage program", func(t *testing.T) {
		err := processruntime.CheckStageExecutable(ctx, script(t, privateDir(t), "x", "echo usage >&2; exit 2"))
		require.ErrorContains(t, err, "does not answer its sandbox source's digest")
		require.ErrorContains(t, err, "usage", "with what it said")
		err = processruntime.CheckStageExecutable(ctx, script(t, privateDir(t), "x", "exit 0"))
		require.ErrorContains(t, err, "printed nothing")
	})
	t.Run("an endless answer is cut", func(t *testing.T) {
		err := processruntime.CheckStageExecutable(ctx, script(t, privateDir(t), "x", "yes | head -c 10000000"))
		require.ErrorContains(t, err, "another source")
	})
	t.Run("a program that never answers", func(t *testing.T) {
		hang := script(t, privateDir(t), "x", "exec sleep 3600")
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err := processruntime.CheckStageExecutable(ctx, hang)
		require.ErrorContains(t, err, "does not answer")
	})
	t.Run("writable by others", func(t *testing.T) {
		dir := privateDir(t)
		loose := script(t, dir, "x", "exit 0")
		require.NoError(t, os.Chmod(loose, 0o775))
		require.ErrorContains(t, processruntime.CheckStageExecutable(ctx, loose), "writable by its group or others")
		require.NoError(t, os.Chmod(loose, 0o755))
		require.NoError(t, os.Chmod(dir, 0o777))
		require.ErrorContains(t, processruntime.CheckStageExecutable(ctx, loose), "its directory")
	})
	t.Run("someone else's", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root, to give the file to another user")
		}
		theirs := script(t, privateDir(t), "x", "exit 0")
		require.NoError(t, os.Chown(theirs, 12345, 12345))
		require.ErrorContains(t, processruntime.CheckStageExecutable(ctx, theirs), "belongs to user 12345")
	})
	t.Run("not an executable file", func(t *testing.T) {
		dir := privateDir(t)
		plain := filepath.Join(dir, "plain")
		require.NoError(t, os.WriteFile(plain, []byte("x"), 0o644))
		for _, p := range []string{"podkit-stages", plain, dir, filepath.Join(dir, "missing")} {
			assert.ErrorContains(t, processruntime.CheckStageExecutable(ctx, p), p)
		}
	})
}

func TestLocateStageExecutableBesideTheProgram(t *testing.T) {
	ctx := context.Background()
	dir := privateDir(t)
	agent := script(t, dir, "agent", "exit 0")

	got, err := processruntime.LocateStageExecutableBeside(ctx, agent)
	require.NoError(t, err, "none beside it")
	require.Empty(t, got)

	stages := buildStages(t, dir)
	got, err = processruntime.LocateStageExecutableBeside(ctx, agent)
	require.NoError(t, err)
	require.Equal(t, stages, got)

	// Through a symbolic link to the program, the program's own directory.
	linkDir := privateDir(t)
	link := filepath.Join(linkDir, "agent")
	require.NoError(t, os.Symlink(agent, link))
	got, err = processruntime.LocateStageExecutableBeside(ctx, link)
	require.NoError(t, err)
	require.Equal(t, stages, got)

	// One that is not of this source is refused, not used.
	require.NoError(t, os.Remove(stages))
	script(t, dir, processruntime.StageExecutableName, "echo 0123")
	got, err = processruntime.LocateStageExecutableBeside(ctx, agent)
	require.ErrorContains(t, err, "another source")
	require.Empty(t, got)
}
