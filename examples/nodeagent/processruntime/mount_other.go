//go:build !linux

package processruntime

// detachMount fails: only Linux mounts a pod's volumes.
func detachMount(string) error { return errUnsupportedOS }
