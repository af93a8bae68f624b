package volume

import (
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// LinuxTmpfs is the default Tmpfs: tmpfs mounts in the agent's mount
// namespace (nosuid, nodev), with mode 0700 until the manager sets the
// volume's own.
type LinuxTmpfs struct{}

var _ Tmpfs = LinuxTmpfs{}

// Mount mounts a tmpfs on dir.
func (LinuxTmpfs) Mount(dir string, sizeBytes int64) error {
	opts := "mode=0700"
	if sizeBytes > 0 {
		opts += ",size=" + strconv.FormatInt(sizeBytes, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return &os.PathError{Op: "mount tmpfs", Path: dir, Err: err}
	}
	return nil
}

// Unmount detaches the mount on dir (MNT_DETACH).
func (LinuxTmpfs) Unmount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return &os.PathError{Op: "unmount", Path: dir, Err: err}
	}
	return nil
}

// IsMountPoint reports whether dir is the root of a mount: statx's
// STATX_ATTR_MOUNT_ROOT, or on kernels without it (before 5.8), a device
// other than its parent's.
func (LinuxTmpfs) IsMountPoint(dir string) (bool, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err != nil {
		return false, &os.PathError{Op: "statx", Path: dir, Err: err}
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	var parent unix.Stat_t
	if err := unix.Lstat(filepath.Dir(filepath.Clean(dir)), &parent); err != nil {
		return false, &os.PathError{Op: "lstat", Path: filepath.Dir(dir), Err: err}
	}
	return unix.Mkdev(stx.Dev_major, stx.Dev_minor) != uint64(parent.Dev), nil
}
