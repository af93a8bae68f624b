//go:build !unix

package volume

import "io/fs"

// noFollow is not available where files have no symbolic links of the
// Unix kind.
const noFollow = 0

// fileOwner reports no owner where files have none of the Unix kind.
func fileOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

// diskUsage returns the size of fi's file.
func diskUsage(fi fs.FileInfo) int64 { return fi.Size() }
