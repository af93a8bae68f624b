// Package terminaltest runs a command on a pseudo-terminal for tests, as a
// user at a terminal runs kubectl exec -it, attach or debug -it: the
// command's stdin, stdout and stderr are the terminal, and the user types
// once the session shows it is ready.
//
// It is for tests only (it fails the test on errors). The terminal is
// Linux's (/dev/ptmx and its ioctls): elsewhere Open, and so Run, skip
// the test.
package terminaltest

import (
	"bufio"
	"bytes"
	"errors"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Cols and Rows are the size of the terminals Run opens.
const (
	Cols = 100
	Rows = 30
)

// Run runs cmd on a pseudo-terminal of Cols x Rows in a session of its
// own, writes typed to the terminal once ready reports true for what the
// terminal has shown so far (keystrokes typed before the session reads
// them wait in the terminal, as a user's do), and returns what the
// terminal showed and cmd's exit code (-1 when it did not exit normally).
// cmd's stdin, stdout, stderr and SysProcAttr are set here. It is called
// from the test's goroutine; ready from another.
func Run(t *testing.T, cmd *exec.Cmd, ready func(shown string) bool, typed string) (string, int) {
	t.Helper()
	master, slave := Open(t, Cols, Rows)
	defer master.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	require.NoError(t, cmd.Start())
	slave.Close()
	var shown bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(master)
		sent := false
		for {
			b, err := r.ReadByte()
			if err != nil {
				return // EIO once the command has exited
			}
			shown.WriteByte(b)
			if !sent && ready(shown.String()) {
				sent = true
				_, _ = master.WriteString(typed)
			}
		}
	}()
	err := cmd.Wait()
	<-done
	return shown.String(), ExitCode(err)
}

// ExitCode is the exit code of a command whose Wait or Run returned err:
// 0 for nil, the process's code for an *exec.ExitError, else -1.
func ExitCode(err error) int {
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr):
		return exitErr.ExitCode()
	}
	return -1
}
