//go:build linux

package processruntime

import (
	"os/exec"
	"syscall"
	"testing"
)

// TestAwaitExitLeavesTheChildToReap: awaitExit returns once the child has
// ended and leaves it a zombie, for the wait after it to reap.
func TestAwaitExitLeavesTheChildToReap(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	returned := make(chan struct{})
	go func() {
		awaitExit(pid)
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("awaitExit returned while the child ran")
	default:
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-returned
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	if err != nil || got != pid {
		t.Fatalf("Wait4(%d, WNOHANG) = %d, %v; want the ended child reaped", pid, got, err)
	}
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child's status is %v; want killed", ws)
	}
}

// TestAwaitExitOfAnEndedChild: a child that ended before the call does
// not block it.
func TestAwaitExitOfAnEndedChild(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitExitedNoReap(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	awaitExit(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}
