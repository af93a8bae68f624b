package simcloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilexec "k8s.io/utils/exec"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
)

var (
	_ vk.BackendStreams = (*Cloud)(nil)
	_ vk.BackendLogs    = (*Cloud)(nil)
)

// session is what a streaming call found when it opened.
type session struct {
	pod       string
	env       []v1.EnvVar
	stdin     bool
	container string
}

// open runs the opening call of a session of op on uid's container (empty:
// none named), under the call's latency, pause and failure rules. The
// container must be running unless anyState.
func (c *Cloud) open(ctx context.Context, op Op, uid types.UID, container string, anyState bool, found func(cp *cloudPod) error) (session, error) {
	var s session
	err := c.call(ctx, Call{Op: op, UID: uid}, func() error {
		cp, ok := c.pods[uid]
		if !ok {
			return c.notFound(uid)
		}
		s.pod = cp.remote.Name
		if container != "" {
			rc := cp.remoteContainer(container)
			if rc == nil {
				return fmt.Errorf("simcloud: pod %s has no container %q: %w", uid, container, vk.ErrNotFound)
			}
			if !anyState && rc.State != vk.ContainerRunning {
				return fmt.Errorf("simcloud: container %q of pod %s is %v, not running", container, uid, rc.State)
			}
			if spec := cp.container(container); spec != nil {
				s.env = slices.Clone(spec.Env)
				s.stdin = spec.Stdin
			}
			s.container = container
		}
		if found != nil {
			return found(cp)
		}
		return nil
	})
	return s, err
}

// exitCode is the error of a simulated command that exits non-zero.
func exitCode(code int) error {
	return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
}

// Exec runs a simulated command in a running container. The cloud knows a
// few commands, which behave as their namesakes: echo ARGS..., cat (stdin
// to stdout), env (the container's environment), hostname (the pod's
// name), sleep SECONDS (on the cloud's clock), stty size (the terminal's
// size, once the client sent one; a terminal is needed), exit CODE and
// sh -c 'exit CODE'. Any other command exits 127, command not found. A
// non-zero exit is a k8s.io/utils/exec.CodeExitError. With a terminal,
// error output goes to stdout, as a terminal merges them.
func (c *Cloud) Exec(ctx context.Context, uid types.UID, container string, cmd []string, a api.AttachIO) error {
	s, err := c.open(ctx, OpExec, uid, container, false, nil)
	if err != nil {
		return err
	}
	if len(cmd) == 0 {
		return errors.New("simcloud: exec: no command")
	}
	stdout, stderr := writerOf(a.Stdout()), writerOf(a.Stderr())
	if a.TTY() {
		stderr = stdout
	}
	if len(cmd) == 3 && cmd[0] == "sh" && cmd[1] == "-c" {
		cmd = strings.Fields(cmd[2])
	}
	switch name, args := cmd[0], cmd[1:]; {
	case name == "echo":
		_, err := fmt.Fprintln(stdout, strings.Join(args, " "))
		return err
	case name == "cat" && len(args) == 0:
		if a.Stdin() == nil {
			return nil
		}
		_, err := io.Copy(stdout, a.Stdin())
		return err
	case name == "env" && len(args) == 0:
		for _, e := range s.env {
			if _, err := fmt.Fprintf(stdout, "%s=%s\n", e.Name, e.Value); err != nil {
				return err
			}
		}
		return nil
	case name == "hostname" && len(args) == 0:
		_, err := fmt.Fprintln(stdout, s.pod)
		return err
	case name == "sleep" && len(args) == 1:
		secs, err := strconv.ParseFloat(args[0], 64)
		if err != nil || secs < 0 {
			fmt.Fprintf(stderr, "sleep: invalid time interval %q\n", args[0])
			return exitCode(1)
		}
		t := c.clock.NewTimer(time.Duration(secs * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case name == "stty" && len(args) == 1 && args[0] == "size":
		if !a.TTY() || a.Resize() == nil {
			fmt.Fprintln(stderr, "stty: 'standard input': Inappropriate ioctl for device")
			return exitCode(1)
		}
		select {
		case size := <-a.Resize():
			_, err := fmt.Fprintf(stdout, "%d %d\n", size.Height, size.Width)
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	case name == "exit" && len(args) == 1:
		code, err := strconv.Atoi(args[0])
		if err != nil || code < 0 || code > 255 {
			fmt.Fprintf(stderr, "exit: %s: numeric argument required\n", args[0])
			return exitCode(2)
		}
		if code == 0 {
			return nil
		}
		return exitCode(code)
	default:
		fmt.Fprintf(stderr, "%s: command not found\n", name)
		return exitCode(127)
	}
}

// writerOf returns w, or a writer that discards when the client did not
// ask for that stream.
func writerOf(w io.WriteCloser) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Attach connects to a running container's main process: the client gets
// what the container writes from now on (its log lines), and what the
// client types goes to the container's standard input, which the
// simulated process echoes to its output (as cat would). Standard input
// needs a container created with stdin: true. The session ends when ctx
// ends, when the client's standard input ends, or when the container stops
// or the pod goes (after what it wrote last was sent).
func (c *Cloud) Attach(ctx context.Context, uid types.UID, container string, a api.AttachIO) error {
	var seen int
	var o *output
	s, err := c.open(ctx, OpAttach, uid, container, false, func(cp *cloudPod) error {
		o = cp.output(container)
		seen = o.written
		return nil
	})
	if err != nil {
		return err
	}
	if a.Stdin() != nil && !s.stdin {
		return fmt.Errorf("simcloud: container %q of pod %s was not created with stdin: true", container, uid)
	}
	stdinDone := make(chan struct{})
	if a.Stdin() != nil {
		go c.feed(uid, container, a.Stdin(), stdinDone)
	}
	stdout := writerOf(a.Stdout())
	for {
		c.mu.Lock()
		lines, n := o.since(seen)
		seen = n
		changed := o.changed
		cp := c.pods[uid]
		running := cp != nil && cp.remoteContainer(container) != nil && cp.remoteContainer(container).State == vk.ContainerRunning
		c.mu.Unlock()
		for _, l := range lines {
			if _, err := stdout.Write(l.text); err != nil {
				return err
			}
		}
		if !running {
			return nil
		}
		select {
		case <-changed:
		case <-stdinDone:
			// Echo what the last input produced, then end.
			c.mu.Lock()
			lines, _ := o.since(seen)
			c.mu.Unlock()
			for _, l := range lines {
				if _, err := stdout.Write(l.text); err != nil {
					return err
				}
			}
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// feed writes what the client sends to the container's output, the
// simulated process echoing its input, until the input ends; then it
// closes done.
func (c *Cloud) feed(uid types.UID, container string, in io.Reader, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 32<<10)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			c.mu.Lock()
			if cp := c.pods[uid]; cp != nil {
				cp.output(container).write(c.clock.Now(), buf[:n])
			}
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// PortForward connects to a port one of the pod's containers declares
// (spec.containers[].ports, TCP), where the simulated server echoes back
// what it receives until the client closes its side. Any other port
// refuses the connection.
func (c *Cloud) PortForward(ctx context.Context, uid types.UID, port int32, stream io.ReadWriteCloser) error {
	_, err := c.open(ctx, OpPortForward, uid, "", false, func(cp *cloudPod) error {
		for _, ct := range cp.spec {
			for _, p := range ct.Ports {
				if p.ContainerPort == port && (p.Protocol == "" || p.Protocol == v1.ProtocolTCP) {
					if cp.remoteContainer(ct.Name).State == vk.ContainerRunning {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("simcloud: pod %s: connection refused on port %d (no running container declares it)", uid, port)
	})
	if err != nil {
		return err
	}
	defer stream.Close()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(stream, stream)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		stream.Close()
		<-done
		return nil
	}
}
