package logshim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Chunk is one file of a container's log.
type Chunk struct {
	Instance int
	Seq      int
}

// Name is the chunk's file name.
func (c Chunk) Name() string { return fmt.Sprintf("%d.%d.log", c.Instance, c.Seq) }

// less orders chunks oldest first.
func (c Chunk) less(d Chunk) bool {
	return c.Instance < d.Instance || (c.Instance == d.Instance && c.Seq < d.Seq)
}

// parseChunk parses a chunk's file name.
func parseChunk(name string) (Chunk, bool) {
	base, ok := strings.CutSuffix(name, ".log")
	if !ok {
		return Chunk{}, false
	}
	is, ss, ok := strings.Cut(base, ".")
	if !ok {
		return Chunk{}, false
	}
	i, err1 := strconv.Atoi(is)
	s, err2 := strconv.Atoi(ss)
	if err1 != nil || err2 != nil || i < 0 || s < 0 || (Chunk{i, s}).Name() != name {
		return Chunk{}, false
	}
	return Chunk{i, s}, true
}

// Chunks lists the chunks in dir, oldest first. A missing directory has
// none.
func Chunks(dir string) ([]Chunk, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []Chunk
	for _, e := range entries {
		if c, ok := parseChunk(e.Name()); ok && e.Type().IsRegular() {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Chunk) int {
		switch {
		case a.less(b):
			return -1
		case b.less(a):
			return 1
		}
		return 0
	})
	return out, nil
}

// InstanceChunks lists the chunks of one instance in dir, oldest first.
func InstanceChunks(dir string, instance int) ([]Chunk, error) {
	all, err := Chunks(dir)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(c Chunk) bool { return c.Instance != instance }), nil
}

// LockName is the file name of an instance's lock.
func LockName(instance int) string { return strconv.Itoa(instance) + ".lock" }

// Locks lists the instances that have a lock file in dir.
func Locks(dir string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if s, ok := strings.CutSuffix(e.Name(), ".lock"); ok {
			if i, err := strconv.Atoi(s); err == nil && i >= 0 && LockName(i) == e.Name() {
				out = append(out, i)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Running reports whether the shim of the instance still runs: its lock
// file exists and is locked. A shim ends only after writing everything it
// read, so once Running is false the instance's chunks are complete.
func Running(dir string, instance int) bool {
	f, err := os.Open(filepath.Join(dir, LockName(instance)))
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// Holder reads the PID and start time (clock ticks since boot) the lock
// file of the instance records for its shim.
func Holder(dir string, instance int) (pid int, startTicks uint64, err error) {
	b, err := os.ReadFile(filepath.Join(dir, LockName(instance)))
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscanf(string(b), "%d %d", &pid, &startTicks); err != nil || pid <= 1 {
		return 0, 0, fmt.Errorf("lock file of log instance %d holds %q, not a process", instance, b)
	}
	return pid, startTicks, nil
}

// CreateLock creates (or takes over, when no shim holds it) the lock file
// of the instance in dir and locks it exclusively. The caller hands the
// file to the shim, which holds the lock until it ends. A lock file still
// locked by a live shim of the same instance (the agent died while
// starting the instance, and starts it again) is replaced by a new one.
func CreateLock(dir string, instance int) (*os.File, error) {
	path := filepath.Join(dir, LockName(instance))
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if err := f.Truncate(0); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, err
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("log instance %d of %s is locked by another process", instance, dir)
}

// prune deletes, in dir, every chunk of instances before previous, then
// the oldest chunks beyond maxFiles, never current. Unlocked lock files of
// instances before previous are deleted too, with the attach sockets a
// killed shim left. Errors are ignored: a chunk
// that cannot be deleted now is tried again at the next rotation.
func prune(dir string, current Chunk, previous, maxFiles int) {
	chunks, err := Chunks(dir)
	if err != nil {
		return
	}
	keep := chunks[:0]
	for _, c := range chunks {
		if c.Instance < previous && c != current {
			_ = os.Remove(filepath.Join(dir, c.Name()))
			continue
		}
		keep = append(keep, c)
	}
	for n, i := len(keep), 0; n > maxFiles && i < len(keep); i++ {
		if keep[i] != current {
			_ = os.Remove(filepath.Join(dir, keep[i].Name()))
			n--
		}
	}
	locks, _ := Locks(dir)
	for _, i := range locks {
		if i < previous && !Running(dir, i) {
			_ = os.Remove(filepath.Join(dir, LockName(i)))
			_ = os.Remove(filepath.Join(dir, AttachSocketName(i)))
		}
	}
}
