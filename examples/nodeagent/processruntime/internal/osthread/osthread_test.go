//go:build linux

package osthread_test

import (
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/osthread"
)

// fromMain is what Discarded called on the main thread saw: the thread its work
// ran on, and whether the calling thread was the main one.
var fromMain struct {
	workTID  int
	wasMain  bool
	runError error
}

// TestMain calls Discarded from the main goroutine, which starts on the main
// thread; with one P, the goroutine Discarded starts runs next on that same
// thread once the caller blocks, the case Discarded must avoid.
func TestMain(m *testing.M) {
	procs := runtime.GOMAXPROCS(1)
	fromMain.wasMain = syscall.Gettid() == syscall.Getpid()
	fromMain.runError = run(func() error {
		fromMain.workTID = syscall.Gettid()
		return nil
	})
	runtime.GOMAXPROCS(procs)
	os.Exit(m.Run())
}

// Discarded called on the main thread does its work on another: the Go runtime
// would keep the main thread (wedged) rather than end it.
func TestDiscardedFromTheMainThreadWorksElsewhere(t *testing.T) {
	if !fromMain.wasMain {
		t.Skip("TestMain's goroutine had left the main thread before it called Discarded")
	}
	require.NoError(t, fromMain.runError)
	assert.NotEqual(t, syscall.Getpid(), fromMain.workTID, "the work ran on the main thread")
}

// A thread that unshared its filesystem context and changed directory
// takes it with it: the test's other goroutines keep theirs.
func TestAChangedThreadIsNotReused(t *testing.T) {
	before, err := os.Getwd()
	require.NoError(t, err)
	dir := t.TempDir()
	for range 20 {
		require.NoError(t, run(func() error {
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				return err
			}
			return unix.Chdir(dir)
		}))
	}
	for range 20 {
		require.NoError(t, run(func() error {
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			assert.Equal(t, before, wd, "a later Discarded got a thread that had changed directory")
			return nil
		}))
	}
}

// run runs f as Discarded does and waits for its error.
func run(f func() error) error {
	done := make(chan error, 1)
	osthread.Discarded(func() { done <- f() })
	return <-done
}
