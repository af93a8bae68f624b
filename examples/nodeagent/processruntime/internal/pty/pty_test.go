//go:build linux

package pty_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/pty"
)

// A shell on the slave, as its controlling terminal, sees a terminal of
// the size set on the master, echoes what is typed, and its end is the
// master's end of file.
func TestAShellOnTheSlaveSeesItsTerminal(t *testing.T) {
	master, slave, err := pty.Open("/dev/ptmx")
	require.NoError(t, err)
	defer master.Close()
	require.NoError(t, pty.SetSize(master, 91, 17))
	cmd := exec.Command("sh", "-c", `[ -t 0 ] && echo "tty $(stty size)"; read line; echo "got $line"`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	slave.Close()
	_, err = master.WriteString("hello\n")
	require.NoError(t, err)
	var out strings.Builder
	buf := make([]byte, 1024)
	for {
		n, err := pty.ReadMaster(master, buf)
		out.Write(buf[:n])
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	require.NoError(t, cmd.Wait())
	lines := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(out.String(), "\r", "")))
	for sc.Scan() {
		lines[sc.Text()] = true
	}
	assert.True(t, lines["tty 17 91"], "the size set on the master: %q", out.String())
	assert.True(t, lines["hello"], "the terminal echoes: %q", out.String())
	assert.True(t, lines["got hello"], "the line reached the shell: %q", out.String())
}

func TestSetSizeRefusesAZeroSide(t *testing.T) {
	master, slave, err := pty.Open("/dev/ptmx")
	require.NoError(t, err)
	defer master.Close()
	defer slave.Close()
	assert.ErrorContains(t, pty.SetSize(master, 0, 24), "zero side")
}

func TestOpenSaysWhatFailed(t *testing.T) {
	_, _, err := pty.Open("/nonexistent/ptmx")
	assert.ErrorContains(t, err, "pty: opening /nonexistent/ptmx")
	_, _, err = pty.Open(os.DevNull)
	assert.ErrorContains(t, err, "pty: unlocking")
}
