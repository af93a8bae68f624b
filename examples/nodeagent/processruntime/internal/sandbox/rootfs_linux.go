//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/podkit/podkit/examples/internal/mountinfo"
)

// This file builds the pod's root, in the spawner's setup: as host root,
// in a mount namespace of the setup thread's own made private (nothing
// propagates to the host), under Config.StageDir:
//
//	<stage>          tmpfs, RootSize, mode 0711
//	<stage>/upper    the pod's writes to its root (overlay upper layer)
//	<stage>/work     the overlay's work directory
//	<stage>/empty    an empty file, mounted over masked files
//	<stage>/root     overlay: the host's root file system below, upper above
//
// and in root, read-only and nosuid: the host's other file systems; then
// the pod's own /dev, /tmp, /run and /dev/shm, the masks, the binds, the
// volumes under volumesDir, and the mount points. The init, started from
// this namespace, inherits it with every mount locked together (its user
// namespace cannot unmount a mask to look below it).
//
// Every path in the pod's root is resolved inside it (openat2 with
// RESOLVE_IN_ROOT), so a symbolic link on the host's root file system
// (/var/run -> /run) leads to the pod's directory, never the host's.

// volumesDir is where the pod's volumes wait, in its root, for the
// container stage to bind them; each container stage covers volumesRoot
// with an empty tmpfs before it runs the container's command.
const (
	volumesRoot = "/.podkit"
	volumesDir  = volumesRoot + "/volumes"
)

// private are the paths the pod gets its own of, never the host's: what
// is below them on the host (and any mask there) is out of sight anyway.
var private = []string{"/proc", "/sys", "/dev", "/run", "/tmp"}

func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if under(p, d) {
			return true
		}
	}
	return false
}

const (
	nosuid = unix.MS_NOSUID | unix.MS_NODEV
	tmpfs  = "tmpfs"
)

// rootFS is the pod's root while the setup builds it.
type rootFS struct {
	path string
	// fd is root opened O_PATH: every path in the pod is resolved from it.
	fd int
}

// buildRoot builds the pod's root and returns its path.
func buildRoot(c *Config) (string, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("making the mount namespace private: %w", err)
	}
	hostMounts, err := mountinfo.ReadThread()
	if err != nil {
		return "", err
	}
	stage := c.StageDir
	// 0711: the init passes through it to the root (finishRoot).
	if err := unix.Mount(tmpfs, stage, tmpfs, nosuid, "mode=0711,size="+strconv.FormatInt(c.RootSize, 10)); err != nil {
		return "", fmt.Errorf("mounting the pod's stage on %s: %w", stage, err)
	}
	upper, work, root, empty := stage+"/upper", stage+"/work", stage+"/root", stage+"/empty"
	for _, d := range []string{upper, work, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(empty, nil, 0o444); err != nil {
		return "", err
	}
	if c.HostID != 0 {
		// The pod's root owns its "/" (what it writes there stays in
		// upper); every host directory below stays the host's.
		if err := os.Chown(upper, int(c.HostID), int(c.HostID)); err != nil {
			return "", err
		}
	}
	opts := "lowerdir=/,upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", root, "overlay", nosuid, opts); err != nil {
		return "", fmt.Errorf("mounting the pod's root (overlay over the host's): %w", err)
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	r := &rootFS{path: root, fd: fd}
	defer unix.Close(fd)
	if err := r.bindHostMounts(c, hostMounts); err != nil {
		return "", err
	}
	if err := r.privateMounts(c); err != nil {
		return "", err
	}
	masked, err := r.mask(c, empty)
	if err != nil {
		return "", err
	}
	for _, b := range c.Binds {
		if err := r.bind(b.Source, b.Target, b.ReadOnly); err != nil {
			return "", fmt.Errorf("making %s visible at %s: %w", b.Source, b.Target, err)
		}
	}
	if err := r.stageVolumes(c); err != nil {
		return "", err
	}
	for _, mp := range c.MountPoints {
		f, err := r.open(mp.Path, true, mp.File)
		if err != nil {
			return "", fmt.Errorf("creating mount point %s: %w", mp.Path, err)
		}
		f.Close()
	}
	// The masks are read-only once what goes below them is there.
	for _, m := range masked {
		if err := r.setattr(m, 0, unix.MOUNT_ATTR_RDONLY); err != nil {
			return "", fmt.Errorf("making mask %s read-only: %w", m, err)
		}
	}
	return root, nil
}

// open opens path, a path in the pod's view, resolved inside the root
// (O_PATH). With create, a missing path is created, as a directory or, when
// file, an empty file, with the directories above it.
func (r *rootFS) open(path string, create, file bool) (*os.File, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(r.fd, path, how)
	if err == nil {
		return os.NewFile(uintptr(fd), path), nil
	}
	if !create || err != unix.ENOENT {
		return nil, err
	}
	parts := strings.Split(strings.Trim(filepath.Clean(path), "/"), "/")
	dir := "/"
	for i, part := range parts {
		next := filepath.Join(dir, part)
		fd, err := unix.Openat2(r.fd, next, how)
		if err == nil {
			unix.Close(fd)
			dir = next
			continue
		}
		if err != unix.ENOENT {
			return nil, err
		}
		pfd, err := unix.Openat2(r.fd, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: how.Resolve})
		if err != nil {
			return nil, err
		}
		if i == len(parts)-1 && file {
			var ffd int
			ffd, err = unix.Openat(pfd, part, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
			if err == nil {
				unix.Close(ffd)
			}
		} else {
			err = unix.Mkdirat(pfd, part, 0o755)
		}
		unix.Close(pfd)
		if err != nil && err != unix.EEXIST {
			return nil, err
		}
		dir = next
	}
	fd, err = unix.Openat2(r.fd, path, how)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// mountOn mounts onto path in the pod (resolved inside the root; created
// when create is set).
func (r *rootFS) mountOn(path string, create, file bool, source, fstype string, flags uintptr, data string) error {
	f, err := r.open(path, create, file)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Mount(source, fdPath(f), fstype, flags, data)
}

// setattr changes the attributes of the mount at path in the pod.
func (r *rootFS) setattr(path string, flags int, attrs uint64) error {
	f, err := r.open(path, false, false)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.MountSetattr(int(f.Fd()), "", uint(unix.AT_EMPTY_PATH|flags), &unix.MountAttr{Attr_set: attrs})
}

func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// bindHostMounts makes the host's file systems mounted below its root
// (but those under private paths, or masked) visible in root, read-only,
// nosuid and nodev, each with what is mounted below it.
func (r *rootFS) bindHostMounts(c *Config, mounts []mountinfo.Mount) error {
	rootID := -1
	for _, m := range mounts {
		if m.MountPoint == "/" {
			rootID = m.ID
		}
	}
	for _, m := range mounts {
		if m.Parent != rootID || m.ID == rootID || underAny(m.MountPoint, private) || underAny(m.MountPoint, c.Masks) {
			continue
		}
		if err := r.mountOn(m.MountPoint, false, false, m.MountPoint, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			if err == unix.ENOENT {
				continue // mounted on something the overlay does not show
			}
			return fmt.Errorf("making the host's %s visible: %w", m.MountPoint, err)
		}
		if under(c.StageDir, m.MountPoint) {
			// The copy holds the pod's own stage: take it out again.
			_ = unix.Unmount(r.path+c.StageDir, unix.MNT_DETACH)
		}
		if err := r.setattr(m.MountPoint, unix.AT_RECURSIVE, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
			return fmt.Errorf("making the host's %s read-only: %w", m.MountPoint, err)
		}
	}
	return nil
}

// hostDevices are the host's device nodes a pod gets in its /dev.
var hostDevices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// privateMounts gives the pod its own /tmp, /run, /dev and /dev/shm, and
// the host's /proc, /sys or /dev where it shares the host's namespaces
// (hostPID, hostNetwork, privileged).
func (r *rootFS) privateMounts(c *Config) error {
	size := ",size=" + strconv.FormatInt(c.TmpSize, 10)
	owner := ""
	if c.HostID != 0 {
		owner = fmt.Sprintf(",uid=%d,gid=%d", c.HostID, c.HostID)
	}
	if err := r.mountOn("/tmp", true, false, tmpfs, tmpfs, nosuid, "mode=1777"+size); err != nil {
		return fmt.Errorf("mounting the pod's /tmp: %w", err)
	}
	if err := r.mountOn("/run", true, false, tmpfs, tmpfs, nosuid, "mode=0755"+owner+size); err != nil {
		return fmt.Errorf("mounting the pod's /run: %w", err)
	}
	if c.HostPID {
		// A PID namespace of the host's: its /proc (the init cannot mount
		// one for a namespace its user namespace does not own).
		if err := r.mountOn("/proc", true, false, "/proc", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("making the host's /proc visible: %w", err)
		}
	}
	if c.HostNetwork || c.JoinNetNS || c.HostID == 0 {
		// sysfs shows the network namespace of whoever mounts it, and the
		// pod's user namespace may mount one only for a network namespace
		// it owns: the host's /sys itself then, read-only unless
		// privileged (without what is mounted below it, the cgroup
		// hierarchies).
		if err := r.mountOn("/sys", true, false, "/sys", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("making the host's /sys visible: %w", err)
		}
		if !c.Privileged {
			if err := r.setattr("/sys", 0, unix.MOUNT_ATTR_RDONLY); err != nil {
				return fmt.Errorf("making /sys read-only: %w", err)
			}
		}
	}
	if c.Privileged {
		if err := r.mountOn("/dev", true, false, "/dev", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("making the host's /dev visible: %w", err)
		}
		return nil
	}
	if err := r.mountOn("/dev", true, false, tmpfs, tmpfs, unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=65536"); err != nil {
		return fmt.Errorf("mounting the pod's /dev: %w", err)
	}
	dev := r.path + "/dev" // a tmpfs of ours: no link in it leads out
	for _, d := range hostDevices {
		if err := r.bind("/dev/"+d, "/dev/"+d, false); err != nil {
			return fmt.Errorf("making /dev/%s visible: %w", d, err)
		}
	}
	for _, d := range []string{"pts", "shm", "mqueue"} {
		if err := os.Mkdir(dev+"/"+d, 0o755); err != nil {
			return err
		}
	}
	for link, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		if err := os.Symlink(to, dev+"/"+link); err != nil {
			return err
		}
	}
	if err := r.mountOn("/dev/shm", false, false, tmpfs, tmpfs, nosuid|unix.MS_NOEXEC, "mode=1777"+size); err != nil {
		return fmt.Errorf("mounting the pod's /dev/shm: %w", err)
	}
	return nil
}

// mask hides each of c.Masks that the root shows: an empty tmpfs over a
// directory (read-write until buildRoot is done, so binds can be made
// below it), the empty file over a file. It returns the masking tmpfs
// mounts, as paths in the pod.
func (r *rootFS) mask(c *Config, empty string) ([]string, error) {
	masks := append([]string(nil), c.Masks...)
	// Outer first, so a mask below another lands on the outer's tmpfs
	// (where it shows nothing anyway).
	sort.Slice(masks, func(i, j int) bool { return len(masks[i]) < len(masks[j]) })
	var dirs []string
	for _, m := range masks {
		m = filepath.Clean(m)
		if underAny(m, private) || m == "/" {
			continue
		}
		f, err := r.open(m, false, false)
		if err != nil {
			continue // not in the pod's view
		}
		var st unix.Stat_t
		err = unix.Fstat(int(f.Fd()), &st)
		switch {
		case err != nil:
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			if err = unix.Mount(tmpfs, fdPath(f), tmpfs, nosuid|unix.MS_NOEXEC, "mode=0755,size=1048576"); err == nil {
				dirs = append(dirs, m)
			}
		default:
			err = unix.Mount(empty, fdPath(f), "", unix.MS_BIND, "")
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("masking %s: %w", m, err)
		}
	}
	return dirs, nil
}

// bind mounts the host's source (a directory or file, with what is
// mounted below it) on target in the pod, creating target (and the
// directories above it) when missing.
func (r *rootFS) bind(source, target string, readOnly bool) error {
	fi, err := os.Stat(source)
	if err != nil {
		return err
	}
	if err := r.mountOn(target, true, !fi.IsDir(), source, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if readOnly {
		return r.setattr(target, unix.AT_RECURSIVE, unix.MOUNT_ATTR_RDONLY)
	}
	return nil
}

// stageVolumes puts each volume of the pod under volumesDir in the root.
func (r *rootFS) stageVolumes(c *Config) error {
	if len(c.Volumes) == 0 {
		return nil
	}
	f, err := r.open(volumesDir, true, false)
	if err != nil {
		return fmt.Errorf("creating the volumes' directory: %w", err)
	}
	f.Close()
	// The pod's root passes through to bind what it needs, and lists
	// nothing.
	if err := os.Chmod(r.path+volumesRoot, 0o711); err != nil {
		return err
	}
	if err := os.Chmod(r.path+volumesDir, 0o711); err != nil {
		return err
	}
	for _, v := range c.Volumes {
		target := volumesDir + "/" + v.Name
		if !v.Memory {
			if err := r.bind(v.Source, target, false); err != nil {
				return fmt.Errorf("staging volume %q from %s: %w", v.Name, v.Source, err)
			}
			continue
		}
		size, mode := v.SizeLimit, v.Mode
		if size == 0 {
			size = DefaultTmpSize
		}
		if mode == 0 {
			mode = 0o777
		}
		opts := fmt.Sprintf("mode=%o,size=%d", mode, size)
		if c.HostID != 0 {
			opts += fmt.Sprintf(",uid=%d,gid=%d", c.HostID, c.HostID+v.GID)
		}
		if err := r.mountOn(target, true, false, tmpfs, tmpfs, nosuid, opts); err != nil {
			return fmt.Errorf("mounting memory volume %q: %w", v.Name, err)
		}
	}
	return nil
}
