//go:build linux

// Package unixsock makes and dials the process runtime's unix stream
// sockets at paths of any length: a sandbox's control socket, a log
// shim's attach socket. A socket's address holds at most 107 bytes, and a
// state directory's paths may be longer, so both go through a descriptor
// of the socket's directory (/proc/self/fd/N/name). Whoever can connect
// to one controls what it serves: they belong in directories only the
// agent reaches, and are made 0600.
//
// The functions may be called from any goroutine.
package unixsock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Listen creates a listening socket at path, replacing what is there,
// with room for backlog connections waiting to be accepted. It returns
// the socket as a file (close-on-exec), for a child process to be
// started with, or for net.FileListener.
func Listen(path string, backlog int) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating a socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		f.Close()
		return nil, fmt.Errorf("replacing %s: %w", path, err)
	}
	err = viaDir(path, func(short string) error {
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: short}); err != nil {
			return err
		}
		if err := unix.Chmod(short, 0o600); err != nil {
			return err
		}
		return unix.Listen(fd, backlog)
	})
	if err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return f, nil
}

// Dial connects to the socket at path. An absent socket's error wraps
// os.ErrNotExist; one nothing listens on any more, ECONNREFUSED.
func Dial(path string) (*net.UnixConn, error) {
	var conn *net.UnixConn
	err := viaDir(path, func(short string) error {
		var err error
		conn, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: short, Net: "unix"})
		return err
	})
	return conn, err
}

// viaDir calls fn with a short name for path, through a descriptor of its
// directory.
func viaDir(path string, fn func(short string) error) error {
	dir, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	return fn("/proc/self/fd/" + strconv.Itoa(dir) + "/" + filepath.Base(path))
}
