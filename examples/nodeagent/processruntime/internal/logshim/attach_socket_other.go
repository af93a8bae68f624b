//go:build !linux

package logshim

import (
	"errors"
	"net"
	"os"
)

var errUnsupportedOS = errors.New("logshim: attach sockets are Linux's only")

// ListenAttach fails: only Linux is supported.
func ListenAttach(string, int) (*os.File, error) { return nil, errUnsupportedOS }

func dialAttach(string, int) (*net.UnixConn, error) { return nil, errUnsupportedOS }
