//go:build linux

package clustertest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// orphanHelperEnv makes this test binary the helper of
// TestControlPlaneStopsWhenItsParentDies.
const orphanHelperEnv = "CLUSTERTEST_ORPHAN_HELPER"

// TestControlPlaneStopsWhenItsParentDies: a process that started a cluster
// and is killed (SIGKILL: no Close) leaves no control plane running, since
// the control plane stops when its standard input ends.
func TestControlPlaneStopsWhenItsParentDies(t *testing.T) {
	if os.Getenv(orphanHelperEnv) != "" {
		orphanHelper()
		return
	}
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestControlPlaneStopsWhenItsParentDies$")
	helper.Env = append(os.Environ(), orphanHelperEnv+"=1")
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	var pid int
	var dir string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if _, err := fmt.Sscanf(lines.Text(), "control plane %d in %s", &pid, &dir); err == nil {
			break
		}
	}
	require.NotZero(t, pid, "the helper started a cluster")
	t.Cleanup(func() { os.RemoveAll(dir) }) // the helper dies before its Close
	pidfd, err := unix.PidfdOpen(pid, 0)
	require.NoError(t, err)
	defer unix.Close(pidfd)

	require.NoError(t, helper.Process.Kill())
	_ = helper.Wait()
	// The descriptor of a process becomes readable when it exits.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	deadline := time.Now().Add(controlPlaneStopTimeout + time.Minute)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		require.NoError(t, err)
		require.Equal(t, 1, n, "the control plane (PID %d) still runs %v after its parent died", pid, controlPlaneStopTimeout+time.Minute)
		return
	}
}

// orphanHelper starts a cluster with no node, says its control plane's
// PID and directory, and waits to be killed.
func orphanHelper() {
	c, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("control plane " + strconv.Itoa(c.controlPlane.cmd.Process.Pid) + " in " + strings.TrimSpace(c.Dir()))
	select {}
}
