package podnet

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Network namespaces: entering one on a locked thread, creating one, and
// keeping one alive as a bind mount of its namespace file.

// inNetns runs fn on an OS thread of its own that is in the network
// namespace nsFD (an open namespace file) for as long as fn runs, and back
// in the calling process's namespace after. Goroutines are moved between
// threads freely, so the thread is locked to a fresh goroutine; if it
// cannot be put back, the goroutine ends still locked, and the Go runtime
// then ends the thread rather than let another goroutine run in the pod's
// namespace. fn must not start goroutines that expect to be in the
// namespace (they would not be) and must not block.
func inNetns(nsFD int, fn func() error) error {
	return onLockedThread(func() error {
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("podnet: enter network namespace: %w", err)
		}
		return fn()
	})
}

// inNewNetns runs fn on a thread in a new, empty network namespace, as
// inNetns does; the namespace lives on only if fn keeps it (keepThreadNetns).
func inNewNetns(fn func() error) error {
	return onLockedThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("podnet: create network namespace: %w", err)
		}
		return fn()
	})
}

// errThreadLost is returned when a thread could not be put back into the
// process's network namespace; the thread was ended.
var errThreadLost = errors.New("podnet: could not return a thread to the host network namespace; the thread was ended")

// onLockedThread runs move on a locked thread and returns the thread to
// the network namespace it started in. move may change the thread's
// network namespace (and only that).
func onLockedThread(move func() error) error {
	done := make(chan error, 1)
	go moveLocked(move, done)
	return <-done
}

func moveLocked(move func() error, done chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread never ends: the Go runtime wedges it instead, so
		// it would stay in the pod's namespace if it could not be put
		// back. Holding it locked here, the work goes to another thread.
		inner := make(chan error, 1)
		go moveLocked(move, inner)
		err := <-inner
		runtime.UnlockOSThread()
		done <- err
		return
	}
	host, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		done <- fmt.Errorf("podnet: open the thread's network namespace: %w", err)
		return
	}
	defer unix.Close(host)
	moveErr := move()
	if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
		// Stay locked: the thread ends with this goroutine.
		done <- errors.Join(moveErr, fmt.Errorf("%w: %w", errThreadLost, err))
		return
	}
	runtime.UnlockOSThread()
	done <- moveErr
}

// isNetns reports an error unless path is a network namespace file
// (/proc/<pid>/ns/net, or a bind mount of one).
func isNetns(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("podnet: network namespace %s: %w", path, err)
	}
	defer unix.Close(fd)
	typ, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil {
		return fmt.Errorf("podnet: %s is not a namespace file: %w", path, err)
	}
	if typ != unix.CLONE_NEWNET {
		return fmt.Errorf("podnet: %s is a namespace file, but not of a network namespace", path)
	}
	return nil
}

// nsID identifies a namespace: its namespace file's device and inode.
type nsID struct{ dev, ino uint64 }

func netnsID(path string) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsID{}, err
	}
	return nsID{dev: st.Dev, ino: st.Ino}, nil
}

// isKept reports whether path is a bind mount of a namespace file (rather
// than the empty file it is mounted on, or nothing).
func isKept(path string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(path, &fs) == nil && fs.Type == unix.NSFS_MAGIC
}

// keepNetns bind-mounts the namespace file src onto path (created empty),
// so the namespace lives as long as the mount, whatever happens to the
// process src belongs to.
func keepNetns(src, path string) error {
	if err := createMountPoint(path); err != nil {
		return err
	}
	if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("podnet: keep network namespace %s at %s: %w", src, path, err)
	}
	return nil
}

// keepThreadNetns keeps the calling thread's network namespace at path. It
// runs inside inNewNetns.
func keepThreadNetns(path string) error {
	return keepNetns("/proc/thread-self/ns/net", path)
}

func createMountPoint(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o400)
	if err != nil {
		return fmt.Errorf("podnet: create %s: %w", path, err)
	}
	return f.Close()
}

// maxStackedMounts bounds how many mounts unkeepNetns takes off one path:
// the package mounts once, but a path mounted over again by someone else
// must not loop forever.
const maxStackedMounts = 16

// unkeepNetns unmounts path (lazily: the namespace ends once no process
// is in it and nothing else holds it) and removes the file. A path that is
// not there is not an error.
func unkeepNetns(path string) error {
	for i := 0; isKept(path); i++ {
		if i == maxStackedMounts {
			return fmt.Errorf("podnet: %s is still mounted after %d unmounts", path, maxStackedMounts)
		}
		if err := unix.Unmount(path, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("podnet: release network namespace %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("podnet: release network namespace: %w", err)
	}
	return nil
}
