package e2e_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/kube/kubeletserver"
)

// hostRuntime is the test's runtime: a pod's commands run as processes
// of this machine in the pod's own directory (so kubectl cp's relative
// paths land there), its port 8080 is a server of the test, and a TTY
// session, which a real process would need a pseudo-terminal for, is a
// script: it prints the terminal's size, then echoes one line typed.
type hostRuntime struct {
	dir string
	// port8080 is the address the pods' port 8080 reaches.
	port8080 string
}

var _ kubeletserver.Streamer = (*hostRuntime)(nil)

func (h *hostRuntime) podDir(pod *v1.Pod) (string, error) {
	d := filepath.Join(h.dir, string(pod.UID))
	return d, os.MkdirAll(d, 0o700)
}

func (h *hostRuntime) Exec(ctx context.Context, pod *v1.Pod, opts *v1.PodExecOptions, s kubeletserver.Streams) (int, error) {
	if s.TTY {
		return 0, ttyScript(s)
	}
	dir, err := h.podDir(pod)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, opts.Command[0], opts.Command[1:]...)
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	if s.Stdin != nil {
		cmd.Stdin = s.Stdin
	}
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		return exitErr.ExitCode(), nil
	}
	return 0, err
}

// ttyScript answers a TTY session: "tty WxH" of the first size, then
// "got LINE" for the first line typed (a terminal sends \r).
func ttyScript(s kubeletserver.Streams) error {
	size, ok := <-s.Resize
	if !ok {
		return errors.New("no terminal size")
	}
	fmt.Fprintf(s.Stdout, "tty %dx%d\r\n", size.Width, size.Height)
	line, err := bufio.NewReader(s.Stdin).ReadString('\r')
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Stdout, "got %s\n", line[:len(line)-1])
	return nil
}

func (h *hostRuntime) Attach(ctx context.Context, pod *v1.Pod, opts *v1.PodAttachOptions, s kubeletserver.Streams) error {
	fmt.Fprintf(s.Stdout, "attached to %s\n", opts.Container)
	if s.Stdin != nil {
		_, err := io.Copy(s.Stdout, s.Stdin)
		return err
	}
	<-ctx.Done()
	return nil
}

func (h *hostRuntime) PortForward(ctx context.Context, pod *v1.Pod, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	if port != 8080 {
		return fmt.Errorf("pod %s listens on no port %d", pod.Name, port)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", h.port8080)
	if err != nil {
		return err
	}
	defer c.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(c, stream)
		c.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(stream, c)
	stream.Close() // ends the copy the other way too
	<-done
	return nil
}
