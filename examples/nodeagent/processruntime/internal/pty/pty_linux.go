//go:build linux

package pty

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Open opens a new pseudo-terminal through the multiplexer at ptmx
// (/dev/ptmx, or the ptmx of a devpts instance): its master, in
// non-blocking mode, and its slave, opened from the master
// (TIOCGPTPEER) so that it is this master's whatever devpts instance the
// caller's /dev/pts shows. Both are close-on-exec and neither is the
// caller's controlling terminal. The error says which step failed.
func Open(ptmx string) (master, slave *os.File, err error) {
	mfd, err := unix.Open(ptmx, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("pty: opening %s: %w", ptmx, err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(mfd)
		return nil, nil, fmt.Errorf("pty: unlocking the terminal: %w", err)
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), uintptr(unix.TIOCGPTPEER), uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		unix.Close(mfd)
		return nil, nil, fmt.Errorf("pty: opening the terminal's slave: %w", errno)
	}
	return os.NewFile(uintptr(mfd), "pty-master"), os.NewFile(sfd, "pty-slave"), nil
}

// SetSize sets the size of the terminal of master, in characters; the
// kernel signals SIGWINCH to the terminal's foreground process group. A
// zero width or height is refused: no terminal has one.
func SetSize(master *os.File, width, height uint16) error {
	if width == 0 || height == 0 {
		return fmt.Errorf("pty: terminal size %dx%d has a zero side", width, height)
	}
	rc, err := master.SyscallConn()
	if err != nil {
		return fmt.Errorf("pty: %w", err)
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: width, Row: height})
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("pty: setting the terminal's size: %w", err)
	}
	return nil
}

// ReadMaster reads from a master as a stream: the EIO a master returns
// once no process holds the slave any more is the stream's end, io.EOF.
func ReadMaster(master *os.File, p []byte) (int, error) {
	n, err := master.Read(p)
	if err != nil && errors.Is(err, syscall.EIO) {
		err = io.EOF
	}
	return n, err
}
