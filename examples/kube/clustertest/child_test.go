//go:build linux

package clustertest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStartChildSurvivesEndedThreads: Linux kills a child with its
// Pdeathsig when the thread that forked it ends, which the agents of a
// test process do to threads (processruntime's discarded threads); a child
// startChild started lives on through such ends, and dies when it is
// killed.
func TestStartChildSurvivesEndedThreads(t *testing.T) {
	t.Run("a child forked on a thread that then ends is killed", func(t *testing.T) {
		cmd := sleeper()
		errc := make(chan error, 1)
		onEndingThread(func() { errc <- cmd.Start() })
		require.NoError(t, <-errc)
		err := cmd.Wait()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "killed, not a clean exit")
		require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "by its Pdeathsig")
	})
	t.Run("startChild's child outlives them", func(t *testing.T) {
		cmd := sleeper()
		var waitErr error
		exited, err := startChild(cmd, &waitErr)
		require.NoError(t, err)
		for range 64 {
			tid := make(chan int, 1)
			onEndingThread(func() { tid <- syscall.Gettid() })
			gone := fmt.Sprintf("/proc/self/task/%d", <-tid)
			require.Eventually(t, func() bool {
				_, err := os.Stat(gone)
				return os.IsNotExist(err)
			}, time.Minute, time.Millisecond, "thread %s ends", gone)
		}
		// Every ended thread has sent its children's Pdeathsig by now: a
		// SIGKILL sent to this one would be pending, or it would be dead.
		state, pending := procState(t, cmd.Process.Pid)
		require.NotContains(t, "ZX", state, "the child is alive")
		require.Zero(t, pending&(1<<(syscall.SIGKILL-1)), "no SIGKILL pending for the child")
		select {
		case <-exited:
			t.Fatalf("the child exited: %v", waitErr)
		default:
		}
		require.NoError(t, cmd.Process.Kill())
		<-exited
		require.Error(t, waitErr, "killed")
	})
}

// onEndingThread runs f on a thread that ends when f returns, as
// processruntime discards threads: on a goroutine locked to a thread that
// is not the main one (the Go runtime never ends the main thread), never
// unlocked.
func onEndingThread(f func()) {
	go func() {
		runtime.LockOSThread()
		if syscall.Gettid() != syscall.Getpid() {
			f()
			return
		}
		ran := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer close(ran)
			f()
		}()
		<-ran
		runtime.UnlockOSThread()
	}()
}

// sleeper is a child that sleeps a minute unless killed, and is killed
// should its parent thread end.
func sleeper() *exec.Cmd {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// procState returns process pid's state letter and its pending signals
// (its shared pending set, /proc/PID/status ShdPnd).
func procState(t *testing.T, pid int) (state string, pending uint64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		key, value, _ := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		switch key {
		case "State":
			state, _, _ = strings.Cut(value, " ")
		case "ShdPnd":
			pending, err = strconv.ParseUint(value, 16, 64)
			require.NoError(t, err)
		}
	}
	return state, pending
}
