//go:build linux

package sandbox

import (
	"fmt"
	"os"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/unixsock"
)

// Launch says how Spawner.Start starts one pod's sandbox.
type Launch struct {
	// Socket is the path of the pod's control socket. Start creates it
	// (replacing what is there) and the init listens on it; Dial connects
	// to it. Required. Its directory must be the agent's alone: whoever
	// can connect controls the pod.
	Socket string
	// Log receives what the init writes (its errors). Defaults to
	// discarding it.
	Log *os.File
	// NetNS is the pod's network namespace (an open namespace file), for
	// Config.JoinNetNS.
	NetNS *os.File
	// Env is the environment of the init ("KEY=value" each) besides its
	// stage's own: the runtime's identifiers of the pod, so that a scan of
	// the process table finds the init with the pod's processes. The
	// init's environment is not the containers': they get their own.
	Env []string
	// Cgroup is a cgroup v2 directory the init is born in (clone3's
	// CLONE_INTO_CGROUP; moved there at once where the kernel cannot clone
	// into a cgroup), which every process of the pod then shares. ""
	// leaves it in the spawner's cgroup.
	Cgroup string
	// JoinTasks are cgroup v1 "tasks" files, one per hierarchy, of the
	// pod's cgroups: the thread that starts the init joins them first, so
	// the init is born there. LeaveTasks, as many, are the cgroups the
	// thread goes back to after (the runtime's own, which outlive every
	// pod's). Where the thread cannot join one, the init is moved to all
	// of them (their cgroup.procs) before it does anything.
	JoinTasks, LeaveTasks []string
}

// listen creates the listening control socket at path.
func listen(path string) (*os.File, error) {
	f, err := unixsock.Listen(path, 8)
	if err != nil {
		return nil, fmt.Errorf("sandbox: the control socket: %w", err)
	}
	return f, nil
}
