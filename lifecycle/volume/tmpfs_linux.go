package volume

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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

// IsMountPoint reads /proc/self/mountinfo for a mount on dir.
func (LinuxTmpfs) IsMountPoint(dir string) (bool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return false, err
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		// ID parent major:minor root mountpoint options ...
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		if unescapeMountPath(fields[4]) == abs {
			return true, nil
		}
	}
	if err := s.Err(); err != nil {
		return false, fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	return false, nil
}

// unescapeMountPath decodes the octal escapes (\040 for a space, ...) of a
// path in /proc/self/mountinfo.
func unescapeMountPath(p string) string {
	if !strings.Contains(p, `\`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+3 < len(p) {
			if v, err := strconv.ParseUint(p[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}
