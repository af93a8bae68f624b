package logshim

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/pty"
)

// The shim's side of the attach protocol (attach_protocol.go): it accepts
// sessions, gives each the output it reads, and passes their input to
// the container's stdin.

const (
	// maxClients caps the attach sessions of one container instance at
	// once; one more is told so (X) and closed.
	maxClients = 32
	// maxClientQueue caps the output a session may have waiting to be
	// sent: a client further behind is ended rather than let the shim's
	// memory grow or the container wait.
	maxClientQueue = 1 << 20
	// clientWriteTimeout bounds one write to a client; one that takes
	// longer ends the session.
	clientWriteTimeout = 10 * time.Second
	// helloTimeout bounds the wait for a new client's hello.
	helloTimeout = 10 * time.Second
	// finishTimeout bounds how long the shim, once the container's output
	// has ended, waits for its sessions to take what is queued for them.
	finishTimeout = 5 * time.Second
)

// attachServer serves the attach sessions of one container instance.
type attachServer struct {
	l         *net.UnixListener
	path      string
	tty       bool
	stdinOnce bool
	// master is the container's terminal (with tty), for resizes.
	master *os.File

	// inMu serializes writes to stdin, apart from mu: a write blocks while
	// the container does not read.
	inMu sync.Mutex

	mu sync.Mutex
	// stdin is where input goes (the pipe's write end, or the terminal);
	// nil when the container has no stdin, or once it was closed
	// (stdinOnce).
	stdin   *os.File
	clients map[*attachClient]struct{}
	// finished: the output has ended; no session is accepted, and each
	// queue ends with its end frame.
	finished bool
	wg       sync.WaitGroup
}

// attachClient is one session. Its fields but conn are guarded by the
// server's mu.
type attachClient struct {
	conn *net.UnixConn
	// wants is the hello's flags; input is true while input is granted.
	wants byte
	input bool
	// queue holds encoded frames not sent yet, queued bytes in all; wake
	// (1-buffered) tells the writer there is more.
	queue  [][]byte
	queued int
	wake   chan struct{}
	// end, once set, is the end frame's payload, sent after the queue:
	// the session is over. ended: the end frame is queued or sent.
	end   string
	ended bool
}

// newAttachServer serves l (its socket file at path). stdin is the
// container's stdin (nil without); master its terminal (nil without).
func newAttachServer(l *net.UnixListener, path string, stdin, master *os.File, stdinOnce bool) *attachServer {
	return &attachServer{l: l, path: path, tty: master != nil, master: master, stdin: stdin, stdinOnce: stdinOnce, clients: map[*attachClient]struct{}{}}
}

// start accepts sessions, from a goroutine of its own, until finish
// closes the listener. The goroutine counts in wg, so that the sessions
// it adds do too before finish waits.
func (s *attachServer) start() {
	s.wg.Go(s.serve)
}

func (s *attachServer) serve() {
	for {
		c, err := s.l.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, say: the next accept may work.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.wg.Go(func() { s.session(c) })
	}
}

// session runs one client: hello, welcome, then its input until it
// leaves; its output is written by a goroutine of its own.
func (s *attachServer) session(conn *net.UnixConn) {
	defer conn.Close()
	buf := make([]byte, maxAttachPayload)
	_ = conn.SetReadDeadline(time.Now().Add(helloTimeout))
	typ, p, err := readFrame(conn, buf)
	if err != nil || typ != frameHello || len(p) != 1 {
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	c := &attachClient{conn: conn, wants: p[0], wake: make(chan struct{}, 1)}
	s.mu.Lock()
	switch {
	case s.finished:
		c.end, c.ended = "the container's output has ended", true
	case len(s.clients) >= maxClients:
		c.end, c.ended = "too many attach sessions for this container", true
	}
	if c.ended {
		s.mu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
		_ = writeFrame(conn, frameEnd, []byte(c.end))
		return
	}
	var grant byte
	if c.wants&attachStdin != 0 && s.stdin != nil {
		c.input = true
		grant |= grantStdin
	}
	if s.tty {
		grant |= grantTTY
	}
	if s.stdinOnce {
		grant |= grantStdinOnce
	}
	// The welcome goes first in the queue: output read from now on
	// follows it.
	c.push(appendFrame(nil, frameWelcome, []byte{grant}))
	s.clients[c] = struct{}{}
	s.mu.Unlock()

	written := make(chan struct{})
	go func() {
		defer close(written)
		s.writer(c)
	}()
	s.readInput(c, buf)
	// Gone, or told to go: its input ends with it.
	s.mu.Lock()
	s.inputEndedLocked(c)
	c.finishLocked("")
	s.mu.Unlock()
	<-written
}

// readInput passes the client's input on until it leaves.
func (s *attachServer) readInput(c *attachClient, buf []byte) {
	for {
		typ, p, err := readFrame(c.conn, buf)
		if err != nil {
			return
		}
		switch typ {
		case frameInput:
			s.mu.Lock()
			in := s.stdin
			ok := c.input && in != nil
			s.mu.Unlock()
			if ok {
				s.inMu.Lock()
				_, err := in.Write(p)
				s.inMu.Unlock()
				if err != nil && !errors.Is(err, os.ErrClosed) {
					// The container's stdin is gone (it exited, or closed
					// it): input has nowhere to go any more.
					s.mu.Lock()
					s.closeStdinLocked()
					s.mu.Unlock()
				}
			}
		case frameClose:
			s.mu.Lock()
			s.inputEndedLocked(c)
			s.mu.Unlock()
		case frameResize:
			if s.master != nil && len(p) == 4 {
				w, h := uint16(p[0])<<8|uint16(p[1]), uint16(p[2])<<8|uint16(p[3])
				_ = pty.SetSize(s.master, w, h)
			}
		}
	}
}

// inputEndedLocked records that c's input has ended: with stdinOnce, the
// container's stdin closes.
func (s *attachServer) inputEndedLocked(c *attachClient) {
	if !c.input {
		return
	}
	c.input = false
	if s.stdinOnce {
		s.closeStdinLocked()
	}
}

// closeStdinLocked closes the container's stdin: a pipe's write end is
// closed (the container reads end of file); a terminal, which carries the
// output too, just takes no more input.
func (s *attachServer) closeStdinLocked() {
	if s.stdin == nil {
		return
	}
	if !s.tty {
		s.stdin.Close()
	}
	s.stdin = nil
	for c := range s.clients {
		c.input = false
	}
}

// writer sends c's queue until its end frame is sent or a write fails.
func (s *attachServer) writer(c *attachClient) {
	defer func() {
		s.mu.Lock()
		delete(s.clients, c)
		s.mu.Unlock()
		// Ends the session's reader too.
		c.conn.Close()
	}()
	for {
		s.mu.Lock()
		frames := c.queue
		c.queue, c.queued = nil, 0
		done := c.ended && len(frames) == 0
		end := c.end
		s.mu.Unlock()
		if done {
			_ = c.conn.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
			_ = writeFrame(c.conn, frameEnd, []byte(end))
			return
		}
		for _, f := range frames {
			_ = c.conn.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
			if _, err := c.conn.Write(f); err != nil {
				return
			}
		}
		if len(frames) == 0 {
			<-c.wake
		}
	}
}

// push queues a frame and wakes the writer.
func (c *attachClient) push(f []byte) {
	c.queue = append(c.queue, f)
	c.queued += len(f)
	c.notify()
}

func (c *attachClient) notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// finishLocked ends c's session after what is queued, with reason as the
// end frame's payload.
func (c *attachClient) finishLocked(reason string) {
	if c.ended {
		return
	}
	c.end, c.ended = reason, true
	c.notify()
}

// output gives the clients that asked for stream (frameStdout or
// frameStderr) a frame of p. It never blocks: a client that would queue
// more than maxClientQueue bytes is ended instead.
func (s *attachServer) output(typ byte, p []byte) {
	want := attachStdout
	if typ == frameStderr {
		want = attachStderr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.clients {
		if c.ended {
			continue
		}
		// With a terminal, all of the output is stdout: a client that
		// asked for either gets it.
		if c.wants&want == 0 && !(s.tty && c.wants&(attachStdout|attachStderr) != 0) {
			continue
		}
		for q := p; len(q) > 0; {
			n := min(len(q), maxAttachPayload)
			if c.queued+frameHeader+n > maxClientQueue {
				c.queue, c.queued = nil, 0
				c.finishLocked("the session fell more than 1 MiB behind the container's output")
				break
			}
			c.push(appendFrame(make([]byte, 0, frameHeader+n), typ, q[:n]))
			q = q[n:]
		}
	}
}

// finish ends the server once the container's output has ended: no new
// session, each one ended after what is queued for it (within
// finishTimeout), the socket removed.
func (s *attachServer) finish() {
	s.l.Close()
	_ = os.Remove(s.path)
	s.mu.Lock()
	s.finished = true
	for c := range s.clients {
		c.finishLocked("")
	}
	s.closeStdinLocked()
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(finishTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.mu.Lock()
		for c := range s.clients {
			c.conn.Close()
		}
		s.mu.Unlock()
		<-done
	}
}
