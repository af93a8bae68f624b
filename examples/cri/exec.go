package cri

import (
	"context"
	"errors"
	"strings"
	"time"

	criapi "k8s.io/cri-api/pkg/apis"
	utilexec "k8s.io/utils/exec"

	"github.com/podkit/podkit/lifecycle/probe"
)

// ExecRunner runs exec probes and exec hooks in containers with the CRI's
// ExecSync: it is the probe.ExecRunner (and containerhook.ExecRunner, the
// same type) of a CRI runtime. Create it with NewExecRunner; the Syncer is
// one too (Syncer.ExecInContainer), over its own ContainerManager.
type ExecRunner struct {
	containers criapi.ContainerManager
}

var (
	_ probe.ExecRunner = (*ExecRunner)(nil)
	_ probe.ExecRunner = (*Syncer)(nil)
)

// NewExecRunner returns an ExecRunner over containers (a Client, or the
// runtime service the Syncer uses). It starts nothing.
func NewExecRunner(containers criapi.ContainerManager) *ExecRunner {
	return &ExecRunner{containers: containers}
}

// ExecInContainer runs cmd in the container containerID (the ContainerID
// of the API status, "<runtime>://<id>", or the CRI's bare ID) with
// ExecSync, and returns its stdout followed by its stderr, and its exit
// code. timeout, when above 0, is the runtime's limit for the command
// (which the CRI counts in whole seconds, rounded up); ctx ends the call.
// A command that ran and exited non-zero is not an error: its code says
// so. err is a call that failed (the container is gone, the runtime does
// not answer, the timeout passed): the command's outcome is unknown. It is
// safe for concurrent use, from any goroutine.
func (r *ExecRunner) ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	if r == nil || r.containers == nil {
		return nil, 0, errors.New("cri: ExecRunner has no ContainerManager")
	}
	stdout, stderr, err := r.containers.ExecSync(ctx, criID(containerID), cmd, max(timeout, 0))
	out := append(stdout, stderr...)
	var exit utilexec.ExitError
	if errors.As(err, &exit) {
		return out, exit.ExitStatus(), nil
	}
	if err != nil {
		return out, 0, err
	}
	return out, 0, nil
}

// ExecInContainer is NewExecRunner(the syncer's ContainerManager)'s: the
// Syncer is the probe.ExecRunner and containerhook.ExecRunner of its
// runtime.
func (s *Syncer) ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	return NewExecRunner(s.containers).ExecInContainer(ctx, containerID, cmd, timeout)
}

// criID is the runtime's ID in an API ContainerID ("<runtime>://<id>"):
// the part after the scheme, or id as it is when it has none.
func criID(id string) string {
	if _, rest, ok := strings.Cut(id, "://"); ok {
		return rest
	}
	return id
}
