//go:build !linux

package containerdtest

import "errors"

// detachMount fails: containerd, and the mounts it leaves, are Linux's.
func detachMount(string) error { return errors.New("containerdtest: unmounting needs Linux") }
