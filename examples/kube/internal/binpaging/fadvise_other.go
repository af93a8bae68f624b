//go:build !linux

package binpaging

import (
	"errors"
	"os"
)

// dropCached fails: the package reads Linux's /proc and advises Linux's
// page cache.
func dropCached(*os.File) error { return errors.New("dropping cached pages needs Linux") }
