package volume

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// The names the atomic writer keeps in a volume's directory, besides the
// visible links: every name it owns starts with "..", which no file path
// of a payload may (see cleanPath).
const (
	dataLink    = "..data"
	newDataLink = "..data_tmp"
	tsPrefix    = ".."
	tsLayout    = "2006_01_02_15_04_05."
)

// hostFile is a file to write: its content, mode and host owner.
type hostFile struct {
	data  []byte
	mode  fs.FileMode
	owner owner
}

// writeState is what the writer remembers of its last write of a volume,
// to skip a write that would change nothing and to know which directories
// it may remove.
type writeState struct {
	sum   [sha256.Size]byte
	tsDir string
	// prevDir is the directory ..data pointed to before tsDir (""
	// none): it is kept until the next write, for the readers that were
	// resolving a path through ..data while it was swapped.
	prevDir string
}

// writeAtomic projects files into dir as the kubelet's atomic writer does,
// so that a reader never sees a half-written set: the files are written
// into a new hidden directory named by the time (..2006_01_02_15_04_05.N),
// the ..data link is swapped to it in one rename, each top-level name of
// the volume is a link into ..data (name -> ..data/name), names no longer
// in files are unlinked, and the previous directory is removed. Readers of
// a file through its visible link see the old content or the new, never a
// mix; a reader watching ..data (inotify) sees one event per update. The
// previous directory is removed at the next write rather than at once
// (the kubelet's is removed at once), so a reader resolving a path through
// ..data while it is swapped finds the previous version rather than no
// file.
//
// Directories belong to dirOwner with dirMode; files have their own
// owners and modes. last is what the previous write of this volume left
// (nil if none is known, after a restart for example): when files, their
// owners and modes are the same and ..data still points where that write
// left it, nothing is written and changed is false.
//
// The caller serializes writes of one dir, and has validated files' paths
// (payload.clean).
func writeAtomic(dir string, files map[string]hostFile, dirOwner owner, dirMode fs.FileMode, now time.Time, last *writeState) (_ *writeState, changed bool, err error) {
	sum := fingerprint(files, dirOwner, dirMode)
	oldTS, err := readDataLink(dir)
	if err != nil {
		return nil, false, err
	}
	if last != nil && last.sum == sum && last.tsDir == oldTS && oldTS != "" {
		return last, false, linkVisible(dir, files, dirOwner)
	}
	keep := []string{oldTS}
	if last != nil && last.tsDir == oldTS {
		keep = append(keep, last.prevDir)
	}
	if err := removeLeftovers(dir, keep...); err != nil {
		return nil, false, err
	}
	tsDir, err := os.MkdirTemp(dir, tsPrefix+now.UTC().Format(tsLayout))
	if err != nil {
		return nil, false, err
	}
	tsName := filepath.Base(tsDir)
	published := false
	defer func() {
		if !published {
			_ = os.RemoveAll(tsDir)
			_ = os.Remove(filepath.Join(dir, newDataLink))
		}
	}()
	if err := setDir(tsDir, dirOwner, dirMode); err != nil {
		return nil, false, err
	}
	for _, p := range sortedPaths(files) {
		if err := writeFile(tsDir, p, files[p], dirOwner, dirMode); err != nil {
			return nil, false, err
		}
	}
	tmp := filepath.Join(dir, newDataLink)
	if err := os.Symlink(tsName, tmp); err != nil {
		return nil, false, err
	}
	if err := os.Lchown(tmp, dirOwner.uid, dirOwner.gid); err != nil {
		return nil, false, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return nil, false, err
	}
	published = true
	if err := linkVisible(dir, files, dirOwner); err != nil {
		return nil, true, err
	}
	if oldTS != "" {
		if err := unlinkGone(dir, oldTS, files); err != nil {
			return nil, true, err
		}
	}
	// The directory before the previous one goes now; the previous one at
	// the next write.
	if err := removeLeftovers(dir, tsName, oldTS); err != nil {
		return nil, true, err
	}
	return &writeState{sum: sum, tsDir: tsName, prevDir: oldTS}, true, nil
}

// readDataLink returns the name of the directory ..data points to, "" if
// there is no ..data. Anything else than a link to a sibling of the
// writer's is an error: the directory is not the writer's.
func readDataLink(dir string) (string, error) {
	target, err := os.Readlink(filepath.Join(dir, dataLink))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the volume's %s link: %w", dataLink, err)
	}
	if strings.Contains(target, "/") || !strings.HasPrefix(target, tsPrefix) || target == dataLink || target == newDataLink {
		return "", fmt.Errorf("the volume's %s link points to %q, not to a directory of its own", dataLink, target)
	}
	return target, nil
}

// removeLeftovers removes the writer's entries of dir (hidden, "..")
// other than ..data and the directories keep names: earlier versions, and
// what an interrupted write left.
func removeLeftovers(dir string, keep ...string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, tsPrefix) && n != dataLink && !slices.Contains(keep, n) {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeFile writes one file at rel inside the new directory ts, making
// its parent directories. Nothing in ts was there before this write, and
// nothing is followed: a link in the way is an error.
func writeFile(ts, rel string, f hostFile, dirOwner owner, dirMode fs.FileMode) error {
	parts := strings.Split(rel, "/")
	cur := ts
	for _, part := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, part)
		err := os.Mkdir(cur, 0o700)
		if err == nil {
			err = setDir(cur, dirOwner, dirMode)
		} else if errors.Is(err, fs.ErrExist) {
			var fi fs.FileInfo
			if fi, err = os.Lstat(cur); err == nil && !fi.IsDir() {
				err = fmt.Errorf("%s is not a directory", cur)
			}
		}
		if err != nil {
			return err
		}
	}
	full := filepath.Join(ts, rel)
	out, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return err
	}
	_, err = out.Write(f.data)
	if err == nil {
		err = out.Chmod(f.mode)
	}
	if err == nil {
		err = out.Chown(f.owner.uid, f.owner.gid)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// setDir gives a directory the writer made its owner and mode.
func setDir(dir string, o owner, mode fs.FileMode) error {
	if err := os.Chmod(dir, mode); err != nil {
		return err
	}
	return chown(dir, o)
}

// linkVisible makes each top-level name of files a link into ..data. A
// name that exists already is left alone, as the kubelet leaves it: a
// link of an earlier write, or (rarely) a directory a subPath mount made
// for a key that did not exist then.
func linkVisible(dir string, files map[string]hostFile, o owner) error {
	for _, top := range topLevel(files) {
		link := filepath.Join(dir, top)
		if _, err := os.Lstat(link); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Symlink(path.Join(dataLink, top), link); err != nil {
			return err
		}
		if err := os.Lchown(link, o.uid, o.gid); err != nil {
			return err
		}
	}
	return nil
}

// unlinkGone removes the visible links of the previous write (whose
// directory is old) that files no longer holds.
func unlinkGone(dir, old string, files map[string]hostFile) error {
	entries, err := os.ReadDir(filepath.Join(dir, old))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	keep := map[string]bool{}
	for _, top := range topLevel(files) {
		keep[top] = true
	}
	for _, e := range entries {
		n := e.Name()
		if keep[n] {
			continue
		}
		link := filepath.Join(dir, n)
		if target, err := os.Readlink(link); err == nil && target == path.Join(dataLink, n) {
			if err := os.Remove(link); err != nil {
				return err
			}
		}
	}
	return nil
}

// topLevel returns the first components of files' paths, sorted, once each.
func topLevel(files map[string]hostFile) []string {
	seen := map[string]bool{}
	var out []string
	for p := range files {
		top, _, _ := strings.Cut(p, "/")
		if !seen[top] {
			seen[top] = true
			out = append(out, top)
		}
	}
	sort.Strings(out)
	return out
}

// sortedPaths returns files' paths, sorted.
func sortedPaths(files map[string]hostFile) []string {
	out := make([]string, 0, len(files))
	for p := range files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// fingerprint hashes what a write makes of files: paths, contents, modes,
// owners, and the directories' owner and mode.
func fingerprint(files map[string]hostFile, dirOwner owner, dirMode fs.FileMode) [sha256.Size]byte {
	h := sha256.New()
	num := func(v uint64) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	num(uint64(dirOwner.uid))
	num(uint64(dirOwner.gid))
	num(uint64(dirMode))
	for _, p := range sortedPaths(files) {
		f := files[p]
		num(uint64(len(p)))
		h.Write([]byte(p))
		num(uint64(len(f.data)))
		h.Write(f.data)
		num(uint64(f.mode))
		num(uint64(f.owner.uid))
		num(uint64(f.owner.gid))
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}
