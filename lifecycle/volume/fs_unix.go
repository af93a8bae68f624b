//go:build unix

package volume

import (
	"io/fs"
	"syscall"
)

// noFollow makes an open fail on a symbolic link instead of following it.
const noFollow = syscall.O_NOFOLLOW

// fileOwner returns the owner of the file fi describes.
func fileOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// diskUsage returns the bytes fi's file takes on its file system.
func diskUsage(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
