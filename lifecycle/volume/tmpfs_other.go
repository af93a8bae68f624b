//go:build !linux

package volume

import (
	"errors"
	"runtime"
)

// LinuxTmpfs is the default Tmpfs; off Linux it mounts nothing and says
// so.
type LinuxTmpfs struct{}

var _ Tmpfs = LinuxTmpfs{}

var errNoTmpfs = errors.New("volume: tmpfs mounts are not supported on " + runtime.GOOS)

// Mount fails.
func (LinuxTmpfs) Mount(string, int64) error { return errNoTmpfs }

// Unmount fails.
func (LinuxTmpfs) Unmount(string) error { return errNoTmpfs }

// IsMountPoint reports that nothing is mounted.
func (LinuxTmpfs) IsMountPoint(string) (bool, error) { return false, nil }
