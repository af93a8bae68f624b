//go:build !linux

package pty

import (
	"errors"
	"os"
)

var errUnsupported = errors.New("pty: only Linux is supported")

// Open fails: only Linux is supported.
func Open(string) (master, slave *os.File, err error) { return nil, nil, errUnsupported }

// SetSize fails: only Linux is supported.
func SetSize(*os.File, uint16, uint16) error { return errUnsupported }

// ReadMaster reads from master.
func ReadMaster(master *os.File, p []byte) (int, error) { return master.Read(p) }
