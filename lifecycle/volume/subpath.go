package volume

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// SubPath returns the host path of subPath inside the volume volumeName of
// the pod uid, for a volume mount with a subPath (or an expanded
// subPathExpr): the path with every symbolic link inside the volume
// resolved, missing directories created (owned as the volume's root, with
// its mode), as the kubelet does. A subPath that is absolute, holds a ".."
// component, or leads out of the volume through a link is an error, as is
// a volume not set up (ErrNotSetUp).
//
// A container that can write to the volume can swap a component for a
// link once SubPath has returned: a runtime that mounts the path itself
// should use OpenSubPath and mount the descriptor instead. Called from
// any goroutine; serialized with the pod's SetUp and TearDown.
func (m *Manager) SubPath(uid types.UID, volumeName, subPath string) (string, error) {
	f, p, err := m.openSubPath(uid, volumeName, subPath)
	if err != nil {
		return "", err
	}
	f.Close()
	return p, nil
}

// OpenSubPath is SubPath returning an O_PATH descriptor of the resolved
// path instead of its name: a runtime bind-mounts /proc/self/fd/<fd> (the
// kubelet's way), so that nothing a container swaps in meanwhile is
// mounted instead. The caller closes the file once mounted.
func (m *Manager) OpenSubPath(uid types.UID, volumeName, subPath string) (*os.File, error) {
	f, _, err := m.openSubPath(uid, volumeName, subPath)
	return f, err
}

func (m *Manager) openSubPath(uid types.UID, volumeName, subPath string) (*os.File, string, error) {
	if err := checkRelative(subPath); err != nil {
		return nil, "", fmt.Errorf("volume: subPath %q of volume %q: %w", subPath, volumeName, err)
	}
	base, rec, err := m.locked(uid, volumeName)
	if err != nil {
		return nil, "", err
	}
	defer rec.mu.Unlock()
	mode, o, err := dirStat(base)
	if err != nil {
		return nil, "", fmt.Errorf("volume: subPath %q of volume %q: %w", subPath, volumeName, err)
	}
	f, p, err := walkIn(base, subPath, func(dirFd int, name string) error {
		return mkdirIn(dirFd, name, mode, o)
	})
	if err != nil {
		return nil, "", fmt.Errorf("volume: subPath %q of volume %q: %w", subPath, volumeName, err)
	}
	return f, p, nil
}

// OpenVolumeFile opens the file at path inside the volume volumeName of
// the pod uid for reading, without following a link out of the volume:
// podenv.VolumeFiles, for fileKeyRef variables (an env file an init
// container wrote). The error wraps fs.ErrNotExist for a missing file.
// Called from any goroutine; the caller closes the reader.
func (m *Manager) OpenVolumeFile(uid types.UID, volumeName, file string) (io.ReadCloser, error) {
	if err := checkRelative(file); err != nil {
		return nil, fmt.Errorf("volume: file %q of volume %q: %w", file, volumeName, err)
	}
	base, rec, err := m.locked(uid, volumeName)
	if err != nil {
		return nil, err
	}
	defer rec.mu.Unlock()
	f, _, err := walkIn(base, file, nil)
	if err != nil {
		return nil, fmt.Errorf("volume: file %q of volume %q: %w", file, volumeName, err)
	}
	defer f.Close()
	r, err := reopen(f)
	if err != nil {
		return nil, fmt.Errorf("volume: file %q of volume %q: %w", file, volumeName, err)
	}
	return r, nil
}

// locked returns the host path of a volume that is set up and its pod's
// record, locked (the caller unlocks it).
func (m *Manager) locked(uid types.UID, volumeName string) (string, *podRecord, error) {
	for {
		base, err := m.HostPath(uid, volumeName)
		if err != nil {
			return "", nil, err
		}
		m.mu.Lock()
		rec := m.recs[uid]
		m.mu.Unlock()
		if rec == nil {
			continue
		}
		rec.mu.Lock()
		if !rec.removed {
			return base, rec, nil
		}
		rec.mu.Unlock()
	}
}

// checkRelative checks a path inside a volume as the kubelet checks a
// subPath: relative, with no ".." component and no NUL byte.
func checkRelative(p string) error {
	switch {
	case path.IsAbs(p):
		return errors.New("must not be an absolute path")
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("must not hold a NUL byte")
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return errors.New("must not contain '..'")
		}
	}
	return nil
}
