//go:build !linux

package volume

import (
	"errors"
	"os"
	"runtime"
)

var errNoSafeWalk = errors.New("volume: resolving paths inside volumes safely is not supported on " + runtime.GOOS)

// walkIn is not supported off Linux: it needs O_PATH descriptors.
func walkIn(string, string, func(int, string) error) (*os.File, string, error) {
	return nil, "", errNoSafeWalk
}

// reopen is not supported off Linux.
func reopen(*os.File) (*os.File, error) { return nil, errNoSafeWalk }

// mkdirIn is not supported off Linux.
func mkdirIn(int, string, os.FileMode, owner) error { return errNoSafeWalk }

// dirStat returns the mode of the directory dir, and no owner.
func dirStat(dir string) (os.FileMode, owner, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, owner{}, err
	}
	return fi.Mode() & (os.ModePerm | os.ModeSetgid), owner{}, nil
}
