// Package mountinfo reads the mount table of the calling process
// (/proc/self/mountinfo) or thread (/proc/thread-self/mountinfo), for the
// examples that look for mounts: the process runtime finds the cgroup v2
// hierarchy and the host's mounts a sandbox shows, the containerd test
// helper the mounts a test left behind.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of the mount table.
type Mount struct {
	// ID is the mount's ID; Parent the ID of the mount it is on (its own
	// ID for the root of the namespace).
	ID, Parent int
	// Root is the directory of the mounted file system that is mounted.
	Root string
	// MountPoint is where it is mounted.
	MountPoint string
	// FSType is the file system's type, e.g. "cgroup2".
	FSType string
	// Super is the file system's own options, e.g. "rw,pids" for a
	// cgroup v1 hierarchy of the pids controller.
	Super string
}

// maxLine bounds one line of the table (the kernel writes paths of up to
// PATH_MAX, escaped, and options).
const maxLine = 1 << 20

// Read returns the mount table of the calling process, in the kernel's
// order (a mount comes after the mounts it is on). Lines it cannot parse
// are skipped.
func Read() ([]Mount, error) {
	return readFile("/proc/self/mountinfo")
}

// ReadThread returns the mount table of the calling thread's mount
// namespace, as Read does: a thread that took a mount namespace of its own
// (unshare(CLONE_FS|CLONE_NEWNS), on a locked thread) sees its own table
// there, where /proc/self shows the process's main thread's.
func ReadThread() ([]Mount, error) {
	return readFile("/proc/thread-self/mountinfo")
}

func readFile(path string) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	defer f.Close()
	return parse(f)
}

// parse reads a table in mountinfo's format:
//
//	id parent major:minor root mountpoint options [optional...] - fstype source superoptions
func parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(postFields) < 1 {
			continue
		}
		id, err1 := strconv.Atoi(fields[0])
		parent, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil {
			continue
		}
		m := Mount{ID: id, Parent: parent, Root: unescape(fields[3]), MountPoint: unescape(fields[4]), FSType: postFields[0]}
		if len(postFields) > 2 {
			m.Super = postFields[2]
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return out, nil
}

// unescape undoes the octal escapes (\040 for a space) of a field.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
