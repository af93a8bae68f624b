package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultEmptyDirMode is an emptyDir's mode when it sets none: anyone may
// write, as on a kubelet.
const defaultEmptyDirMode fs.FileMode = 0o777

// setUpEmptyDirLocked prepares an emptyDir volume: a directory of the
// pod's (its root's, in its fsGroup with the set-group-id bit), on the
// node's disk or, for medium Memory, on a tmpfs as large as its sizeLimit,
// the pod's memory limit or the node's allocatable memory, the smallest.
// An existing directory (a sync after the first, or after the agent
// restarted) is kept as it is, content and modes: only a missing tmpfs is
// mounted again. rec.mu must be held.
func (m *Manager) setUpEmptyDirLocked(pod *v1.Pod, v *v1.Volume, dir string, own ownership, root owner) error {
	src := v.EmptyDir
	memory := src.Medium == v1.StorageMediumMemory
	fresh, err := makeDir(dir)
	if err != nil {
		return err
	}
	if memory {
		mounted, err := m.ensureTmpfs(dir, m.memorySize(pod, src.SizeLimit))
		if err != nil {
			return err
		}
		fresh = fresh || mounted
	}
	if !fresh {
		return nil
	}
	mode := defaultEmptyDirMode
	if src.Mode != nil {
		if *src.Mode < 0 || *src.Mode > 0o1777 {
			return fmt.Errorf("invalid emptyDir mode %#o: must be within 0000 and 01777", *src.Mode)
		}
		mode = fs.FileMode(*src.Mode) & fs.ModePerm
		if *src.Mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
	}
	if own.fsGroup != nil {
		mode |= fs.ModeSetgid | 0o770
	}
	if err := os.Chmod(dir, mode); err != nil {
		return err
	}
	return chown(dir, root)
}

// makeDir makes dir (mode 0700 until its owner sets its own) and reports
// whether it made it; an existing directory is fine, anything else in its
// place an error.
func makeDir(dir string) (bool, error) {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s exists and is not a directory", dir)
	}
	return false, nil
}

// ensureTmpfs mounts a tmpfs of size bytes on dir through the Tmpfs,
// unless one is mounted there already, surviving the Tmpfs's panic;
// mounted reports whether it mounted one now.
func (m *Manager) ensureTmpfs(dir string, size int64) (mounted bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the Tmpfs panicked: %v", r)
		}
	}()
	already, err := m.opts.Tmpfs.IsMountPoint(dir)
	if err != nil || already {
		return false, err
	}
	return true, m.opts.Tmpfs.Mount(dir, size)
}

// memorySize returns the size of a memory emptyDir, as the kubelet sizes
// it: the node's allocatable memory, lowered to the pod's memory limit
// when it has one, lowered to the volume's sizeLimit when set; 0 (the
// system's default) when none is known.
func (m *Manager) memorySize(pod *v1.Pod, sizeLimit *resource.Quantity) int64 {
	var size int64
	if m.opts.NodeAllocatable != nil {
		func() {
			defer func() { _ = recover() }()
			if q, ok := m.opts.NodeAllocatable()[v1.ResourceMemory]; ok {
				size = q.Value()
			}
		}()
	}
	lower := func(v int64) {
		if v > 0 && (size == 0 || v < size) {
			size = v
		}
	}
	lower(podMemoryLimit(pod))
	if sizeLimit != nil {
		lower(sizeLimit.Value())
	}
	return size
}

// podMemoryLimit returns the most memory pod may use, when it is bounded:
// its pod-level limit, else, when every container has a memory limit,
// the largest of the sum of its containers' and sidecars' limits and each
// init container's limit; else 0.
func podMemoryLimit(pod *v1.Pod) int64 {
	if pod.Spec.Resources != nil {
		if q, ok := pod.Spec.Resources.Limits[v1.ResourceMemory]; ok && !q.IsZero() {
			return q.Value()
		}
	}
	limitOf := func(c *v1.Container) (int64, bool) {
		q, ok := c.Resources.Limits[v1.ResourceMemory]
		return q.Value(), ok && !q.IsZero()
	}
	var sum, initMax int64
	for i := range pod.Spec.Containers {
		l, ok := limitOf(&pod.Spec.Containers[i])
		if !ok {
			return 0
		}
		sum += l
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		l, ok := limitOf(c)
		if !ok {
			return 0
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sum += l
		} else if l > initMax {
			initMax = l
		}
	}
	return max(sum, initMax)
}

// Reasons of the events the manager records.
const (
	// ReasonFailedMount (Warning): a volume could not be set up or
	// brought up to date; the message is the kubelet's, "MountVolume.SetUp
	// failed for volume "name" : why".
	ReasonFailedMount = "FailedMount"
	// ReasonSizeLimitExceeded (Warning): an emptyDir on disk holds more
	// than its sizeLimit; the message is the kubelet eviction manager's.
	ReasonSizeLimitExceeded = "SizeLimitExceeded"
)

// checkSizeLimitsLocked measures the emptyDirs on disk of rec's pod that
// have a sizeLimit, and reports each that holds more (once until it is
// back under): an event, and Options.Evict. rec.mu must be held.
func (m *Manager) checkSizeLimitsLocked(rec *podRecord) {
	pod := rec.pod
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		ed := v.EmptyDir
		if ed == nil || ed.Medium == v1.StorageMediumMemory || ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0 {
			continue
		}
		used, err := usage(filepath.Join(rec.dir, v.Name), m.opts.MaxUsageEntries)
		if err != nil && !errors.Is(err, errTooManyEntries) {
			m.logger.Error(err, "Couldn't measure an emptyDir", "pod", podName(pod), "volume", v.Name)
			continue
		}
		if err == nil && used <= ed.SizeLimit.Value() {
			delete(rec.over, v.Name)
			continue
		}
		if rec.over[v.Name] {
			continue
		}
		rec.over[v.Name] = true
		msg := fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q.", v.Name, ed.SizeLimit.String())
		if err != nil {
			msg = fmt.Sprintf("EmptyDir volume %q holds more than %d files and directories: treated as over its limit %q.", v.Name, m.opts.MaxUsageEntries, ed.SizeLimit.String())
		}
		m.recorder.Eventf(pod, v1.EventTypeWarning, ReasonSizeLimitExceeded, "%s", msg)
		if m.opts.Evict != nil {
			func() {
				defer func() {
					if r := recover(); r != nil {
						m.logger.Error(fmt.Errorf("%v", r), "Options.Evict panicked", "pod", podName(pod))
					}
				}()
				m.opts.Evict(pod.UID, msg)
			}()
		}
	}
}

// errTooManyEntries: a walk met more entries than it may count.
var errTooManyEntries = errors.New("volume: too many entries to measure")

// usage returns the bytes the files under dir take on disk, walking at
// most maxEntries entries (errTooManyEntries beyond). Links are not
// followed; files that vanish during the walk are skipped.
func usage(dir string, maxEntries int) (int64, error) {
	var total int64
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != dir {
				return nil
			}
			return err
		}
		n++
		if n > maxEntries {
			return errTooManyEntries
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		total += diskUsage(fi)
		return nil
	})
	return total, err
}
