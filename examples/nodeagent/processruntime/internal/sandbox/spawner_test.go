//go:build linux

package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/sandbox"
)

// launchFor makes a StageDir and a socket for one sandbox of a test, and
// fills cfg's name and host IDs.
func launchFor(t *testing.T, cfg *sandbox.Config) sandbox.Launch {
	t.Helper()
	dir := t.TempDir()
	cfg.StageDir = filepath.Join(dir, "stage")
	require.NoError(t, os.Mkdir(cfg.StageDir, 0o700))
	if cfg.HostID == 0 {
		cfg.HostID = testHostID()
	}
	if cfg.Name == "" {
		cfg.Name = "test/" + t.Name()
	}
	return sandbox.Launch{Socket: filepath.Join(dir, "init.sock"), Env: []string{"PODKIT_SPAWNER_TEST=" + t.Name()}}
}

// children returns this process's children whose first argument is
// argv0, with their environments.
func children(t *testing.T, argv0 string) map[int][]string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	out := map[int][]string{}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			cmdline, err := os.ReadFile("/proc/" + f + "/cmdline")
			if err != nil || strings.Split(string(cmdline), "\x00")[0] != argv0 {
				continue
			}
			env, _ := os.ReadFile("/proc/" + f + "/environ")
			out[pid] = strings.Split(string(env), "\x00")
		}
	}
	return out
}

// stopInit kills and reaps a sandbox's init.
func stopInit(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, 0, nil)
}

// One spawner starts many sandboxes at once, each init a child of the
// caller, and stays the one process doing it.
func TestASpawnerStartsManySandboxesAtOnce(t *testing.T) {
	requireSandbox(t)
	s := newSpawner(t)
	const n = 8
	pids := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cfg := sandbox.Config{Name: "test/many-" + strconv.Itoa(i)}
		l := launchFor(t, &cfg)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pids[i], errs[i] = s.Start(ctx, &cfg, l)
		})
	}
	wg.Wait()
	inits := children(t, "podkit-sandbox-init")
	for i := range n {
		require.NoError(t, errs[i])
		t.Cleanup(func() { stopInit(pids[i]) })
		assert.Contains(t, inits, pids[i], "sandbox %d's init is the caller's child", i)
	}
	assert.Len(t, children(t, "podkit-sandbox-spawner"), 1, "one spawner for all of them")
}

// A spawner that ended (killed here) is started again by the next Start.
func TestASpawnerThatEndedIsStartedAgain(t *testing.T) {
	requireSandbox(t)
	s := newSpawner(t)
	start := func() (int, error) {
		cfg := sandbox.Config{}
		l := launchFor(t, &cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pid, err := s.Start(ctx, &cfg, l)
		if err == nil {
			t.Cleanup(func() { stopInit(pid) })
		}
		return pid, err
	}
	_, err := start()
	require.NoError(t, err)
	spawners := children(t, "podkit-sandbox-spawner")
	require.Len(t, spawners, 1)
	for pid := range spawners {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	// The Spawner reaps it (its reader sees the connection end): wait for
	// the kill to have taken effect before the next Start, which may
	// otherwise still find the connection open and fail.
	for pid := range spawners {
		waitGone(t, pid)
	}
	_, err = start()
	require.NoError(t, err, "the next Start starts a new spawner")
	again := children(t, "podkit-sandbox-spawner")
	require.Len(t, again, 1)
	for pid := range again {
		assert.NotContains(t, spawners, pid, "a new spawner")
	}
}

// waitGone waits until child pid of this process has ended (a zombie, or
// reaped), by a pidfd.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // reaped already
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 30_000)
		if err == unix.EINTR {
			continue
		}
		require.NoError(t, err)
		require.Equal(t, 1, n, "child %d did not end", pid)
		return
	}
}

// Start after Close fails with ErrSpawnerClosed and starts nothing.
func TestStartAfterCloseFails(t *testing.T) {
	requireSandbox(t)
	s, err := sandbox.NewSpawner(sandbox.SpawnerOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	cfg := sandbox.Config{}
	l := launchFor(t, &cfg)
	_, err = s.Start(context.Background(), &cfg, l)
	assert.ErrorIs(t, err, sandbox.ErrSpawnerClosed)
	assert.Empty(t, children(t, "podkit-sandbox-spawner"))
}

// A Start whose ctx has ended returns its error, and the init the spawner
// started for it anyway is killed and reaped: once the spawner is closed
// (which waits for its setups under way), no init of it is left.
func TestAnAbandonedStartLeavesNoInit(t *testing.T) {
	requireSandbox(t)
	s, err := sandbox.NewSpawner(sandbox.SpawnerOptions{})
	require.NoError(t, err)
	cfg := sandbox.Config{}
	l := launchFor(t, &cfg)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Start(ctx, &cfg, l)
	assert.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.Close())
	for pid, env := range children(t, "podkit-sandbox-init") {
		assert.NotContains(t, env, "PODKIT_SPAWNER_TEST="+t.Name(), "init %d of the abandoned start is left", pid)
	}
}

// Bad input is refused before anything starts.
func TestSpawnerRefusesBadInput(t *testing.T) {
	_, err := sandbox.NewSpawner(sandbox.SpawnerOptions{Executable: "relative/podkit-stages"})
	assert.ErrorContains(t, err, "not an absolute path")
	s, err := sandbox.NewSpawner(sandbox.SpawnerOptions{})
	require.NoError(t, err)
	defer s.Close()
	cfg := sandbox.Config{Name: "test/bad", StageDir: t.TempDir(), HostID: testHostID()}
	_, err = s.Start(context.Background(), &cfg, sandbox.Launch{})
	assert.ErrorContains(t, err, "Launch.Socket is required")
	_, err = s.Start(context.Background(), &cfg, sandbox.Launch{Socket: filepath.Join(t.TempDir(), "s"), JoinTasks: []string{"/x/tasks"}})
	assert.ErrorContains(t, err, "JoinTasks")
	assert.Empty(t, children(t, "podkit-sandbox-spawner"), "nothing started")
}

// A spawner executable that is not one (it ends at once, saying why)
// makes Start fail with an error that says so, rather than hang.
func TestAProgramThatIsNoSpawnerFailsStart(t *testing.T) {
	requireSandbox(t)
	script := filepath.Join(t.TempDir(), "not-a-spawner")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho 'I am not a spawner' >&2\nexit 3\n"), 0o755))
	s, err := sandbox.NewSpawner(sandbox.SpawnerOptions{Executable: script})
	require.NoError(t, err)
	defer s.Close()
	cfg := sandbox.Config{}
	l := launchFor(t, &cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = s.Start(ctx, &cfg, l)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the sandbox spawner ended (it said: I am not a spawner)")
	assert.NoError(t, ctx.Err(), "Start waited for its ctx rather than the spawner's end")
}
