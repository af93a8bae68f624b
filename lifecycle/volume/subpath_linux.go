package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxLinkHops bounds the symbolic links one walk follows, as the kernel
// does (ELOOP).
const maxLinkHops = 40

// walkIn opens rel inside the directory base, one component at a time
// with O_PATH and O_NOFOLLOW relative to the directory resolved so far,
// so nothing a container swaps in while the walk runs can lead it out of
// base. A symbolic link is followed when it stays inside base: a relative
// one from its directory (".." never above base), an absolute one when
// it names a path under base; one that leads out is an error. mkdir, when
// not nil, makes a missing component as a directory (in the directory
// whose descriptor it gets) before the walk goes on, as the kubelet
// creates a missing subPath.
//
// It returns an O_PATH descriptor of what rel names and its path (base
// joined with the components resolved); the caller closes the file.
func walkIn(base, rel string, mkdir func(dirFd int, name string) error) (*os.File, string, error) {
	rootFd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", &os.PathError{Op: "open", Path: base, Err: err}
	}
	// stack holds the descriptors of the directories from base down to
	// the current one, names their components below base.
	stack := []int{rootFd}
	var names []string
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	queue := splitPath(rel)
	hops := 0
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == ".." {
			if len(stack) == 1 {
				return nil, "", fmt.Errorf("%q leads out of the volume", rel)
			}
			unix.Close(stack[len(stack)-1])
			stack, names = stack[:len(stack)-1], names[:len(names)-1]
			continue
		}
		dir := stack[len(stack)-1]
		fd, err := unix.Openat(dir, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && mkdir != nil {
			if err = mkdir(dir, c); err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = unix.Openat(dir, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		if err != nil {
			return nil, "", &os.PathError{Op: "open", Path: filepath.Join(append([]string{base}, append(names, c)...)...), Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, "", err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			stack, names = append(stack, fd), append(names, c)
			continue
		}
		hops++
		target, err := readlinkFd(fd)
		unix.Close(fd)
		if err != nil {
			return nil, "", err
		}
		if hops > maxLinkHops {
			return nil, "", fmt.Errorf("%q: too many levels of symbolic links", rel)
		}
		if filepath.IsAbs(target) {
			inside, ok := under(base, target)
			if !ok {
				return nil, "", fmt.Errorf("%q leads out of the volume (a link to %s)", rel, target)
			}
			for _, fd := range stack[1:] {
				unix.Close(fd)
			}
			stack, names = stack[:1], nil
			queue = append(inside, queue...)
			continue
		}
		queue = append(splitPath(target), queue...)
	}
	fd := stack[len(stack)-1]
	if len(stack) == 1 {
		if fd, err = unix.Dup(fd); err != nil {
			return nil, "", err
		}
	} else {
		stack = stack[:len(stack)-1]
	}
	p := filepath.Join(append([]string{base}, names...)...)
	return os.NewFile(uintptr(fd), p), p, nil
}

// splitPath splits a path into its components, without empty ones and
// ".".
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// under returns the components of the absolute path target below base,
// when target names base or a path under it lexically, with no ".."
// before base is reached.
func under(base, target string) ([]string, bool) {
	b := splitPath(base)
	t := splitPath(target)
	if len(t) < len(b) {
		return nil, false
	}
	for i := range b {
		if t[i] != b[i] {
			return nil, false
		}
	}
	return t[len(b):], true
}

// readlinkFd reads the target of the symbolic link fd (an O_PATH
// descriptor of it).
func readlinkFd(fd int) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", &os.PathError{Op: "readlink", Path: fmt.Sprintf("fd %d", fd), Err: err}
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= 1<<16 {
			return "", errors.New("a symbolic link's target is too long")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// reopen opens the file an O_PATH descriptor names for reading.
func reopen(f *os.File) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file", f.Name())
	}
	r, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// mkdirIn makes a directory name in dirFd, with mode and owner, setting
// them through a descriptor of the new directory so that nothing swapped
// in its place is changed.
func mkdirIn(dirFd int, name string, mode os.FileMode, o owner) error {
	if err := unix.Mkdirat(dirFd, name, 0o700); err != nil {
		return err
	}
	fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	perm := uint32(mode.Perm())
	if mode&os.ModeSetgid != 0 {
		perm |= unix.S_ISGID
	}
	if err := unix.Fchown(fd, o.uid, o.gid); err != nil {
		return err
	}
	return unix.Fchmod(fd, perm)
}

// dirStat returns the mode and owner of the directory dir.
func dirStat(dir string) (os.FileMode, owner, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, owner{}, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	mode := os.FileMode(st.Mode & 0o777)
	if st.Mode&unix.S_ISGID != 0 {
		mode |= os.ModeSetgid
	}
	return mode, owner{int(st.Uid), int(st.Gid)}, nil
}
