package volume

// Tmpfs mounts the memory-backed file systems of a pod's volumes:
// emptyDir volumes of medium Memory, and secret and projected volumes,
// whose content (secrets, tokens) never reaches the node's disk, as on a
// kubelet. The default, LinuxTmpfs, mounts tmpfs, which needs
// CAP_SYS_ADMIN; an agent without it gives its own (and says where its
// secrets go).
//
// Its methods are called from SetUp's, TearDown's and Run's goroutines,
// for any pod's volumes, never twice at once for one directory.
type Tmpfs interface {
	// Mount mounts a memory file system of at most sizeBytes (0: the
	// system's default) on dir, an empty directory.
	Mount(dir string, sizeBytes int64) error
	// Unmount unmounts what is mounted on dir, even if it is in use (the
	// mount then goes once its last user does).
	Unmount(dir string) error
	// IsMountPoint reports whether something is mounted on dir.
	IsMountPoint(dir string) (bool, error)
}
