package kube_test

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// dropPageCache evicts bin from the page cache, so that the agent maps
// its binary as a node's agent started from disk does: a binary just
// written by the linker sits in the page cache in large folios, each
// mapped whole at its first fault, which adds 10 to 15 MiB to the RSS of
// a process started from it.
func dropPageCache(b *testing.B, bin string) {
	f, err := os.Open(bin)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}
