//go:build !linux

package kube_test

import "testing"

// dropPageCache skips the benchmark: evicting a file from the page cache
// (posix_fadvise) is done here for Linux only, where the footprint is
// measured.
func dropPageCache(b *testing.B, bin string) {
	b.Skip("dropping a binary from the page cache needs Linux")
}
