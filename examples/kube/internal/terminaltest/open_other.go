//go:build !linux

package terminaltest

import (
	"os"
	"testing"
)

// Open skips the test: a pseudo-terminal here is Linux's /dev/ptmx and
// its ioctls.
func Open(t *testing.T, cols, rows uint16) (master, slave *os.File) {
	t.Helper()
	t.Skip("terminaltest: a pseudo-terminal needs Linux's /dev/ptmx")
	return nil, nil
}
