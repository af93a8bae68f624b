package binpaging

import (
	"os"
	"syscall"
)

// dropCached asks the kernel to drop the page cache's pages of f
// (posix_fadvise POSIX_FADV_DONTNEED over the whole file).
func dropCached(f *os.File) error {
	const fadvDontNeed = 4 // POSIX_FADV_DONTNEED on Linux
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
