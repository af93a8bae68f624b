package podnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// A netlink socket talks to the rtnetlink of the network namespace it was
// created in, for its whole life, whichever thread uses it afterwards. So a
// pod's namespace is entered only to create a socket (see inNetns), and
// every request to that namespace then goes through the socket from any
// goroutine.

const (
	// ioTimeout bounds each send and each read on a netlink socket: the
	// kernel answers at once, so a read that waits this long means
	// something is wrong and fails rather than hangs.
	ioTimeout = 10
	// recvBufferSize is the read buffer: the kernel fits each batch of a
	// dump into what the reader offered before, up to 32 KiB, so this holds
	// any one read; a truncated read is an error, never a silent loss.
	recvBufferSize = 64 << 10
	// maxDumpMessages caps the messages one dump may return (links or
	// addresses of one namespace), so a namespace with a runaway number of
	// links costs an error rather than unbounded memory.
	maxDumpMessages = 1 << 16
	// maxDumpRetries is how often a dump interrupted by a concurrent change
	// (NLM_F_DUMP_INTR) is started again before giving up.
	maxDumpRetries = 8
)

// nlConn is a NETLINK_ROUTE socket. It is not safe for concurrent use;
// each operation of a Network opens its own.
type nlConn struct {
	fd   int
	seq  uint32
	port uint32 // the socket's netlink port ID, assigned by the kernel at bind
	buf  []byte
}

// openNetlink opens a NETLINK_ROUTE socket in the calling thread's network
// namespace.
func openNetlink() (*nlConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("podnet: netlink socket: %w", err)
	}
	c := &nlConn{fd: fd, buf: make([]byte, recvBufferSize)}
	tv := unix.Timeval{Sec: ioTimeout}
	for _, opt := range []int{unix.SO_RCVTIMEO, unix.SO_SNDTIMEO} {
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			c.close()
			return nil, fmt.Errorf("podnet: netlink socket timeout: %w", err)
		}
	}
	// Acknowledgements without a copy of the request, and with the
	// kernel's text for an error when it has one. Both are best effort:
	// older kernels just give less.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		c.close()
		return nil, fmt.Errorf("podnet: netlink bind: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("podnet: netlink getsockname: %w", err)
	}
	nl, ok := sa.(*unix.SockaddrNetlink)
	if !ok {
		c.close()
		return nil, fmt.Errorf("podnet: netlink getsockname: unexpected address %T", sa)
	}
	c.port = nl.Pid
	return c, nil
}

func (c *nlConn) close() {
	if c != nil && c.fd >= 0 {
		_ = unix.Close(c.fd)
		c.fd = -1
	}
}

// nlError is an error the kernel answered a request with. It unwraps to
// the errno, so errors.Is(err, unix.ENODEV) works.
type nlError struct {
	op    string
	errno syscall.Errno
	msg   string // the kernel's extended ack text, if any
}

func (e *nlError) Error() string {
	if e.msg != "" {
		return fmt.Sprintf("podnet: %s: %v (%s)", e.op, e.errno, e.msg)
	}
	return fmt.Sprintf("podnet: %s: %v", e.op, e.errno)
}

func (e *nlError) Unwrap() error { return e.errno }

// do sends one request and waits for its acknowledgement, returning the
// data messages that came before it (one, for a get). op names the request
// in errors.
func (c *nlConn) do(op string, typ uint16, flags uint16, body []byte) ([]nlMessage, error) {
	msgs, _, err := c.exchange(op, typ, flags|unix.NLM_F_ACK, body)
	return msgs, err
}

// dump sends a dump request and returns every message of the dump, starting
// it again if a concurrent change interrupted it.
func (c *nlConn) dump(op string, typ uint16, body []byte) ([]nlMessage, error) {
	for range maxDumpRetries {
		msgs, interrupted, err := c.exchange(op, typ, unix.NLM_F_DUMP, body)
		if err != nil || !interrupted {
			return msgs, err
		}
	}
	return nil, fmt.Errorf("podnet: %s: dump interrupted %d times by concurrent changes", op, maxDumpRetries)
}

func (c *nlConn) exchange(op string, typ uint16, flags uint16, body []byte) (msgs []nlMessage, interrupted bool, err error) {
	c.seq++
	seq := c.seq
	req := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	req = append(req, body...)
	putHeader(req, nlHeader{length: uint32(len(req)), typ: typ, flags: flags | unix.NLM_F_REQUEST, seq: seq})
	if err := unix.Sendto(c.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, false, fmt.Errorf("podnet: %s: netlink send: %w", op, err)
	}
	for {
		n, _, rflags, _, err := unix.Recvmsg(c.fd, c.buf, nil, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				err = fmt.Errorf("no answer in %ds: %w", ioTimeout, os.ErrDeadlineExceeded)
			}
			return nil, false, fmt.Errorf("podnet: %s: netlink receive: %w", op, err)
		}
		if rflags&unix.MSG_TRUNC != 0 {
			return nil, false, fmt.Errorf("podnet: %s: netlink answer larger than %d bytes", op, len(c.buf))
		}
		got, err := parseMessages(c.buf[:n])
		if err != nil {
			return nil, false, fmt.Errorf("podnet: %s: %w", op, err)
		}
		for _, m := range got {
			if m.header.seq != seq || m.header.port != c.port {
				continue // an answer to an earlier request that gave up, or not ours
			}
			if m.header.flags&unix.NLM_F_DUMP_INTR != 0 {
				interrupted = true
			}
			switch m.header.typ {
			case unix.NLMSG_ERROR:
				if err := ackError(op, m.header.flags, m.data); err != nil {
					return nil, false, err
				}
				return msgs, interrupted, nil
			case unix.NLMSG_DONE:
				if err := doneError(op, m.data); err != nil {
					return nil, false, err
				}
				return msgs, interrupted, nil
			case unix.NLMSG_NOOP:
			default:
				if len(msgs) == maxDumpMessages {
					return nil, false, fmt.Errorf("podnet: %s: more than %d messages in one answer", op, maxDumpMessages)
				}
				// The buffer is reused by the next read: keep a copy.
				m.data = append([]byte(nil), m.data...)
				msgs = append(msgs, m)
			}
		}
	}
}

// ackError reads an NLMSG_ERROR payload: nil for an acknowledgement.
// flags are the error message's own: NLM_F_CAPPED when the kernel echoed
// only the request's header (NETLINK_CAP_ACK), NLM_F_ACK_TLVS when
// extended ack attributes (the kernel's text) follow the echo.
func ackError(op string, flags uint16, data []byte) error {
	if len(data) < 4 {
		return fmt.Errorf("podnet: %s: short netlink error message (%d bytes)", op, len(data))
	}
	code := int32(binary.NativeEndian.Uint32(data))
	if code == 0 {
		return nil
	}
	e := &nlError{op: op, errno: syscall.Errno(-code)}
	if flags&unix.NLM_F_ACK_TLVS == 0 || len(data) < 4+unix.SizeofNlMsghdr {
		return e
	}
	echo := unix.SizeofNlMsghdr
	if flags&unix.NLM_F_CAPPED == 0 {
		echo = align4(int(getHeader(data[4:]).length))
	}
	if 4+echo <= len(data) {
		if attrs, err := parseAttrs(data[4+echo:]); err == nil {
			if a, ok := attrs.get(unix.NLMSGERR_ATTR_MSG); ok {
				e.msg = cString(a)
			}
		}
	}
	return e
}

// doneError reads an NLMSG_DONE payload, which carries a dump's error.
func doneError(op string, data []byte) error {
	if len(data) < 4 {
		return nil
	}
	if code := int32(binary.NativeEndian.Uint32(data)); code < 0 {
		return &nlError{op: op, errno: syscall.Errno(-code)}
	}
	return nil
}
