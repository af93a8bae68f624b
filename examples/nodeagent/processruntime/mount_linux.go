package processruntime

import "syscall"

// detachMount unmounts the file system at path lazily (MNT_DETACH): it is
// gone from the mount table at once, and released when no one uses it.
func detachMount(path string) error {
	return syscall.Unmount(path, syscall.MNT_DETACH)
}
