package logshim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The attach protocol, between a client (the agent's Attach) and the
// shim of a container instance, over the unix stream socket
// <instance>.attach in the container's log directory (AttachSocketName).
// The agent creates the socket and hands its listening end to the shim
// (fdAttach); the shim removes it when it ends.
//
// Each frame is a type byte, a 4-byte big-endian length, and that many
// bytes of payload, at most maxAttachPayload:
//
//	client -> shim
//	  H hello      1 byte: the streams wanted (attachStdin|attachStdout|attachStderr); first and once
//	  I input      bytes for the container's stdin
//	  C close      the client's stdin has ended
//	  R resize     4 bytes: width, height (uint16 each), of the client's terminal
//	shim -> client
//	  W welcome    1 byte: what is granted (grantStdin, grantTTY, grantStdinOnce); the answer to H
//	  O stdout     the container's output (with a terminal, all of it)
//	  E stderr     the container's standard error (never with a terminal)
//	  X end        the session's end; payload empty when the container's
//	               output ended (it exited), else why the shim ends it
//
// Closing the connection detaches; it never stops the container. Input
// is granted only when asked, when the container has stdin (stdin: true),
// and while its stdin is open: with stdinOnce, the shim closes the
// container's stdin once the first client granted input has closed it
// (C) or left, and grants no input after (with a terminal, it stops
// passing input on: the terminal carries the output too). Without
// stdinOnce, the container's stdin stays open across sessions, and a
// client's C or departure changes nothing for the container. Resize
// applies to a terminal only. Several clients share the output: each
// gets every frame of the streams it asked for from its arrival on,
// unless it falls more than maxClientQueue bytes behind, when the shim
// ends its session ("X" with the reason); input from several clients
// interleaves, frame by frame.

// The frame types.
const (
	frameHello   byte = 'H'
	frameInput   byte = 'I'
	frameClose   byte = 'C'
	frameResize  byte = 'R'
	frameWelcome byte = 'W'
	frameStdout  byte = 'O'
	frameStderr  byte = 'E'
	frameEnd     byte = 'X'
)

// The flags of hello.
const (
	attachStdin  byte = 1
	attachStdout byte = 2
	attachStderr byte = 4
)

// The flags of welcome.
const (
	grantStdin     byte = 1
	grantTTY       byte = 2
	grantStdinOnce byte = 4
)

const (
	// maxAttachPayload caps a frame's payload; what a reader or a client
	// has more of goes in several frames.
	maxAttachPayload = 32 << 10
	// frameHeader is the size of a frame's header.
	frameHeader = 5
)

// AttachSocketName is the file name, in the container's log directory, of
// the attach socket of instance's shim.
func AttachSocketName(instance int) string { return strconv.Itoa(instance) + ".attach" }

// appendFrame appends a frame of typ with payload p to b.
func appendFrame(b []byte, typ byte, p []byte) []byte {
	b = append(b, typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[len(b)-4:], uint32(len(p)))
	return append(b, p...)
}

// writeFrame writes one frame (p at most maxAttachPayload bytes).
func writeFrame(w io.Writer, typ byte, p []byte) error {
	_, err := w.Write(appendFrame(make([]byte, 0, frameHeader+len(p)), typ, p))
	return err
}

// readFrame reads one frame into buf (which must hold maxAttachPayload
// bytes) and returns its type and payload, a slice of buf.
func readFrame(r io.Reader, buf []byte) (byte, []byte, error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxAttachPayload {
		return 0, nil, fmt.Errorf("logshim: an attach frame of %d bytes exceeds %d", n, maxAttachPayload)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[0], buf[:n], nil
}

// resizePayload encodes a terminal size.
func resizePayload(width, height uint16) []byte {
	var p [4]byte
	binary.BigEndian.PutUint16(p[:2], width)
	binary.BigEndian.PutUint16(p[2:], height)
	return p[:]
}
