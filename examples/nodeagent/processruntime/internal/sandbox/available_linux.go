//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Available reports why sandboxes cannot be built here, or nil when they
// can: the agent must run as root (to map a range of host IDs onto a
// pod's user namespace) in the host's mount namespace, with user
// namespaces enabled, overlayfs, a kernel of at least 5.12 (pidfd_open,
// openat2, mount_setattr), and an executable others may run (the stages
// run it as the pods' IDs): executable, as SpawnerOptions.Executable, or the
// running program when it is "". It starts nothing.
func Available(executable string) error {
	if os.Geteuid() != 0 {
		return errors.New("the agent does not run as root, so it cannot map a range of host IDs onto a pod's user namespace")
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		return errors.New("user namespaces are not available (user.max_user_namespaces is 0 or unreadable)")
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "\toverlay\n") {
		return errors.New("the kernel has no overlay file system")
	}
	if err := unix.MountSetattr(-1, "", 0, &unix.MountAttr{}); err == unix.ENOSYS {
		return errors.New("the kernel has no mount_setattr (Linux 5.12 or later is needed)")
	}
	if _, err := unix.Openat2(-1, "", &unix.OpenHow{}); err == unix.ENOSYS {
		return errors.New("the kernel has no openat2 (Linux 5.6 or later is needed)")
	}
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err == unix.ENOSYS {
		return errors.New("the kernel has no pidfd_open (Linux 5.3 or later is needed)")
	}
	if err == nil {
		unix.Close(fd)
	}
	if executable != "" {
		fi, err := os.Stat(executable)
		switch {
		case err != nil:
			return fmt.Errorf("the sandbox stages' executable: %w", err)
		case !fi.Mode().IsRegular():
			return fmt.Errorf("the sandbox stages' executable %s is not a regular file", executable)
		case fi.Mode()&0o001 == 0:
			return fmt.Errorf("the sandbox stages' executable %s may not be executed by others, as the pods' sandbox stages must", executable)
		}
		return nil
	}
	fi, err := os.Stat(selfExe)
	if err != nil {
		return fmt.Errorf("the agent's executable: %w", err)
	}
	if fi.Mode()&0o001 == 0 {
		exe, _ := os.Readlink(selfExe)
		return fmt.Errorf("the agent's executable %s may not be executed by others, as the pods' sandbox stages must", exe)
	}
	return nil
}
