package containerdtest

import "syscall"

// detachMount unmounts the file system at path lazily (MNT_DETACH).
func detachMount(path string) error {
	return syscall.Unmount(path, syscall.MNT_DETACH)
}
