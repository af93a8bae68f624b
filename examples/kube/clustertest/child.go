package clustertest

import (
	"os/exec"
	"runtime"
)

// startChild starts cmd, whose SysProcAttr.Pdeathsig kills it should this
// process die, and waits for it in the background: the returned channel
// is closed once it has ended, and *waitErr is then cmd.Wait's error.
//
// Linux sends Pdeathsig when the thread that forked the child ends, not
// the process, and the agents of this process end threads of their own
// (processruntime discards a thread that joined a pod's cgroups, podnet
// one it could not bring back from a pod's network namespace): a child
// forked from such a thread, or from any thread the Go runtime later
// gives to such work, would be killed at a random moment. So the child is
// forked from a goroutine locked to its thread, which it holds, unused by
// any other goroutine, until the child has ended.
func startChild(cmd *exec.Cmd, waitErr *error) (exited <-chan struct{}, err error) {
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		*waitErr = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}
