package clustertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/podkit/podkit/examples/kube/internal/controlplane"
)

// controlPlaneStartTimeout bounds the wait for podkit-controlplane's
// status: etcd, the API server (healthy, the default namespace made), the
// scheduler and the controller manager started. It takes 2 to 6 seconds;
// more on a loaded machine or under -race.
const controlPlaneStartTimeout = 3 * time.Minute

// controlPlaneStopTimeout bounds a graceful stop of podkit-controlplane
// before it is killed.
const controlPlaneStopTimeout = 30 * time.Second

// controlPlane is a running podkit-controlplane process.
type controlPlane struct {
	cmd *exec.Cmd
	// stdin is the write end of the program's standard input: closing it
	// stops the program.
	stdin io.WriteCloser
	// tail keeps the end of the program's output, for errors.
	tail *tailWriter
	// exited is closed once the process has exited and its output is
	// copied; err is then Wait's error.
	exited chan struct{}
	err    error
	status controlplane.Status
}

// runControlPlane starts the podkit-controlplane program binary on the
// control plane's directory dir, serving the API server on listener, and
// returns once it reported its status. The listener is the program's from
// then on: runControlPlane closes this process's copy. log receives the
// program's output (nil: discarded). extra are the components' flags.
func runControlPlane(ctx context.Context, binary, dir string, listener *net.TCPListener, log io.Writer, extra componentFlags) (*controlPlane, error) {
	listenerFile, err := listener.File()
	listener.Close()
	if err != nil {
		return nil, fmt.Errorf("clustertest: the API server's listener: %w", err)
	}
	defer listenerFile.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("clustertest: %w", err)
	}
	defer statusR.Close()

	args := []string{"--" + controlplane.FlagDir + "=" + dir}
	for _, a := range extra.apiserver {
		args = append(args, "--"+controlplane.FlagAPIServerArg+"="+a)
	}
	for _, a := range extra.scheduler {
		args = append(args, "--"+controlplane.FlagSchedulerArg+"="+a)
	}
	for _, a := range extra.controllerManager {
		args = append(args, "--"+controlplane.FlagControllerManagerArg+"="+a)
	}
	if log == nil {
		log = io.Discard
	}
	p := &controlPlane{tail: &tailWriter{max: 50}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout = io.MultiWriter(log, p.tail)
	p.cmd.Stderr = p.cmd.Stdout
	// ExtraFiles[i] is the program's descriptor 3+i.
	p.cmd.ExtraFiles = make([]*os.File, controlplane.ListenerFD-2)
	p.cmd.ExtraFiles[controlplane.StatusFD-3] = statusW
	p.cmd.ExtraFiles[controlplane.ListenerFD-3] = listenerFile
	// A process group of its own: a Ctrl-C at the terminal reaches this
	// process, which stops the nodes first, and not the control plane.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		statusW.Close()
		return nil, fmt.Errorf("clustertest: %w", err)
	}
	err = p.cmd.Start()
	statusW.Close()
	if err != nil {
		p.stdin.Close()
		return nil, fmt.Errorf("clustertest: starting %s: %w", binary, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()

	read := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(statusR).ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &p.status)
		}
		read <- err
	}()
	timeout := time.NewTimer(controlPlaneStartTimeout)
	defer timeout.Stop()
	select {
	case err = <-read:
		if err == nil {
			return p, nil
		}
		// No status: the program failed, and says why at its exit.
		<-p.exited
		err = fmt.Errorf("clustertest: the control plane did not start (%v): %s", p.err, p.tail.String())
	case <-timeout.C:
		err = fmt.Errorf("clustertest: the control plane did not start within %v; its last output: %s", controlPlaneStartTimeout, p.tail.String())
	case <-ctx.Done():
		err = fmt.Errorf("clustertest: starting the control plane: %w", ctx.Err())
	}
	return nil, errors.Join(err, p.stop())
}

// stop stops the program: it closes its standard input and waits, and
// kills it (its whole process group) after controlPlaneStopTimeout. It
// returns the program's exit error, if any. It may be called more than
// once.
func (p *controlPlane) stop() error {
	p.stdin.Close()
	timeout := time.NewTimer(controlPlaneStopTimeout)
	defer timeout.Stop()
	select {
	case <-p.exited:
	case <-timeout.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("clustertest: the control plane did not stop within %v and was killed; its last output: %s", controlPlaneStopTimeout, p.tail.String())
	}
	if p.err != nil {
		return fmt.Errorf("clustertest: the control plane: %w; its last output: %s", p.err, p.tail.String())
	}
	return nil
}

// componentFlags are the extra flags of each component.
type componentFlags struct {
	apiserver, scheduler, controllerManager []string
}

// componentFlags returns the components' flags for o: the node-lifecycle
// timings, then o's own flags, which win.
func (o Options) componentFlags() componentFlags {
	eviction := strconv.Itoa(o.PodEvictionSeconds)
	return componentFlags{
		apiserver: append([]string{
			// The NoExecute tolerations the DefaultTolerationSeconds
			// plugin gives every pod: how long a pod stays on a node that
			// is not ready before it is evicted.
			"--default-not-ready-toleration-seconds=" + eviction,
			"--default-unreachable-toleration-seconds=" + eviction,
		}, o.APIServerFlags...),
		scheduler: o.SchedulerFlags,
		controllerManager: append([]string{
			"--node-monitor-grace-period=" + o.NodeMonitorGracePeriod.String(),
			"--node-startup-grace-period=" + o.NodeMonitorGracePeriod.String(),
		}, append(o.controllerManagerNetworkFlags(), o.ControllerManagerFlags...)...),
	}
}

// maxTailLine bounds a line tailWriter keeps.
const maxTailLine = 4096

// tailWriter keeps the last max lines written to it, each cut to
// maxTailLine bytes.
type tailWriter struct {
	max     int
	mu      sync.Mutex
	lines   []string
	partial string
}

func (w *tailWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	parts := strings.Split(w.partial+string(b), "\n")
	for i, l := range parts {
		if len(l) > maxTailLine {
			parts[i] = l[:maxTailLine]
		}
	}
	w.partial = parts[len(parts)-1]
	w.lines = append(w.lines, parts[:len(parts)-1]...)
	if over := len(w.lines) - w.max; over > 0 {
		w.lines = append(w.lines[:0], w.lines[over:]...)
	}
	return len(b), nil
}

// String returns the lines kept, one per line after a leading newline,
// or "(none)".
func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := w.lines
	if w.partial != "" {
		lines = append(lines[:len(lines):len(lines)], w.partial)
	}
	if len(lines) == 0 {
		return "(none)"
	}
	return "\n" + strings.Join(lines, "\n")
}
