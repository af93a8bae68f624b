package logshim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// The client's side of the attach protocol (attach_protocol.go).

// ErrNoAttach is wrapped by Attach's error when the instance's shim
// serves no attach socket: it has ended (and so has the container's
// output), or it was started without one.
var ErrNoAttach = errors.New("logshim: the container's log shim serves no attach session")

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Width, Height uint16
}

// AttachStreams are the client's ends of an attach session. A nil Stdin
// asks for no input; a nil Stdout or Stderr for no such output.
type AttachStreams struct {
	// Stdin is copied to the container's stdin, when the shim grants
	// input. Its end of file ends the session, except with stdinOnce and
	// no terminal, where it closes the container's stdin instead and the
	// output goes on (as containerd does it).
	Stdin io.Reader
	// Stdout and Stderr get the container's output; with a terminal, all
	// of it goes to Stdout (to Stderr when Stdout is nil).
	Stdout, Stderr io.Writer
	// Resize delivers the client's terminal size; applied to a container
	// with a terminal, read and dropped otherwise. May be nil.
	Resize <-chan TerminalSize
}

// Attached says what a session was granted, as the shim answered.
type Attached struct {
	// Stdin: the client's input reaches the container. TTY: the
	// container has a terminal. StdinOnce: its stdin closes once the
	// first session with input ends.
	Stdin, TTY, StdinOnce bool
}

// Attach runs an attach session with the shim of instance in dir (the
// container's log directory): it copies the container's output to
// s.Stdout and s.Stderr and, when granted, s.Stdin to the container,
// until the container's output ends (it exited), ctx ends, or the
// client's input ends (see AttachStreams.Stdin); then it detaches, never
// stopping the container. granted, when not nil, is called with what the
// shim granted before any output is copied. It returns nil when the
// session ended so; an error when it could not start (wrapping ErrNoAttach
// when there is no socket), when the shim ended it (a client too slow),
// or when the output could not be written. The goroutine reading s.Stdin
// ends when a Read of it returns: Attach does not wait for it, since a
// Read cannot be interrupted; the caller's session closing s.Stdin ends
// it. Safe to call concurrently, for the same instance too.
func Attach(ctx context.Context, dir string, instance int, s AttachStreams, granted func(Attached)) error {
	conn, err := dialAttach(dir, instance)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%w (instance %d in %s)", ErrNoAttach, instance, dir)
		}
		return fmt.Errorf("logshim: connecting to the attach socket: %w", err)
	}
	defer conn.Close()
	// A session ends with ctx from here on, whatever it waits for.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var wants byte
	if s.Stdin != nil {
		wants |= attachStdin
	}
	if s.Stdout != nil {
		wants |= attachStdout
	}
	if s.Stderr != nil {
		wants |= attachStderr
	}
	if err := writeFrame(conn, frameHello, []byte{wants}); err != nil {
		return attachError(ctx, "saying hello", err)
	}
	buf := make([]byte, maxAttachPayload)
	typ, p, err := readFrame(conn, buf)
	switch {
	case err != nil:
		return attachError(ctx, "reading the welcome", err)
	case typ == frameEnd:
		return fmt.Errorf("logshim: the shim refused the session: %s", p)
	case typ != frameWelcome || len(p) != 1:
		return fmt.Errorf("logshim: the shim answered frame %q instead of a welcome", typ)
	}
	a := Attached{Stdin: p[0]&grantStdin != 0, TTY: p[0]&grantTTY != 0, StdinOnce: p[0]&grantStdinOnce != 0}
	if granted != nil {
		granted(a)
	}

	var wmu sync.Mutex
	send := func(typ byte, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
		return writeFrame(conn, typ, p)
	}
	// detach is closed when the client's input ending ends the session.
	detach := make(chan struct{})
	if a.Stdin && s.Stdin != nil {
		go copyInput(s.Stdin, send, !a.StdinOnce || a.TTY, detach)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { forwardResizes(s.Resize, a.TTY, send, done) })
	out := make(chan error, 1)
	wg.Go(func() { out <- copyOutput(conn, buf, s, a.TTY) })
	select {
	case err = <-out:
	case <-detach:
	case <-ctx.Done():
	}
	conn.Close()
	close(done)
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// attachError is err, or nil when ctx ended (and closed the connection).
func attachError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("logshim: attach: %s: %w", what, err)
}

// copyInput sends in as input frames; at its end it sends close, then
// closes detach when the end of input ends the session.
func copyInput(in io.Reader, send func(byte, []byte) error, endsSession bool, detach chan<- struct{}) {
	buf := make([]byte, maxAttachPayload)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if send(frameInput, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = send(frameClose, nil)
			if endsSession {
				close(detach)
			}
			return
		}
	}
}

// forwardResizes sends each size of resize (with a terminal; drops them
// without) until resize closes or done is closed.
func forwardResizes(resize <-chan TerminalSize, tty bool, send func(byte, []byte) error, done <-chan struct{}) {
	if resize == nil {
		return
	}
	for {
		select {
		case size, ok := <-resize:
			if !ok {
				return
			}
			if tty && size.Width > 0 && size.Height > 0 {
				_ = send(frameResize, resizePayload(size.Width, size.Height))
			}
		case <-done:
			return
		}
	}
}

// copyOutput writes the output frames to the client's streams until the
// end frame (nil, or the shim's reason as an error) or the connection's
// end.
func copyOutput(conn net.Conn, buf []byte, s AttachStreams, tty bool) error {
	stdout, stderr := s.Stdout, s.Stderr
	if tty && stdout == nil {
		stdout = stderr
	}
	for {
		typ, p, err := readFrame(conn, buf)
		if err != nil {
			return fmt.Errorf("logshim: attach: the shim's connection ended: %w", err)
		}
		var w io.Writer
		switch typ {
		case frameStdout:
			w = stdout
		case frameStderr:
			w = stderr
		case frameEnd:
			if len(p) > 0 {
				return fmt.Errorf("logshim: the shim ended the session: %s", p)
			}
			return nil
		}
		if w == nil {
			continue
		}
		if _, err := w.Write(p); err != nil {
			return fmt.Errorf("logshim: attach: writing the output: %w", err)
		}
	}
}
