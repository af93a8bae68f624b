package volume

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotSetUp is the error of HostPath, SubPath, OpenSubPath and
// OpenVolumeFile for a volume SetUp did not prepare (yet).
var ErrNotSetUp = errors.New("volume: not set up")

// ErrContentRemovable is the error of SetUp for a pod whose content the
// engine says may be removed (terminated and deleted, evicted, unknown):
// its volumes are not (re)created.
var ErrContentRemovable = errors.New("volume: the pod's content may be removed")

// MountError is SetUp's error when some of a pod's volumes could not be
// prepared: the runtime does not start the pod's containers, and returns
// the error from its SyncPod so the engine retries (the kubelet's pod
// waits in ContainerCreating the same way). Each volume's error was
// recorded as a FailedMount event.
type MountError struct {
	// Pod is the pod, namespace/name.
	Pod string
	// Volumes are the volumes that failed, in the pod's order.
	Volumes []VolumeError
}

// VolumeError is why one volume could not be prepared.
type VolumeError struct {
	Name string
	Err  error
}

// Unwrap returns the volumes' errors, for errors.Is and errors.As.
func (e *MountError) Unwrap() []error {
	out := make([]error, len(e.Volumes))
	for i, v := range e.Volumes {
		out[i] = v.Err
	}
	return out
}

func (e *MountError) Error() string {
	names := make([]string, len(e.Volumes))
	whys := make([]string, len(e.Volumes))
	for i, v := range e.Volumes {
		names[i] = v.Name
		whys[i] = fmt.Sprintf("volume %q: %v", v.Name, v.Err)
	}
	return fmt.Sprintf("volume: pod %s: unmounted volumes=[%s]: %s", e.Pod, strings.Join(names, " "), strings.Join(whys, "; "))
}
