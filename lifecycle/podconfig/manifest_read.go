package podconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// This file reads one manifest file with bounds on what the file can cost:
// its size, the time one read may take, and the kinds of file opened at
// all. A manifest directory is often writable by more than the agent, and
// one bad file must not freeze or crash the node.

const (
	// DefaultMaxManifestSize is the largest manifest file a ManifestSource
	// reads when ManifestOptions.MaxFileSize is 0: 1.5 MiB, the largest
	// object the API server stores (etcd's request limit), so a larger
	// static pod could not have a mirror pod anyway.
	DefaultMaxManifestSize = 3 << 19
	// DefaultManifestReadTimeout is how long reading one manifest file may
	// take when ManifestOptions.ReadTimeout is 0.
	DefaultManifestReadTimeout = 5 * time.Second
	// maxStuckReads is how many reads that timed out may still be blocked
	// (each holds a goroutine until its system call returns). Past it, no
	// file is read until one of them ends.
	maxStuckReads = 16
)

var (
	// errNotRegular: the path is not a regular file (a named pipe, a
	// device, a socket); it is reported, never read.
	errNotRegular = errors.New("not a regular file")
	// errIsDir: the path is a directory (or a symlink to one); it is
	// skipped silently, as subdirectories are.
	errIsDir = errors.New("a directory")
)

// readManifestFile reads the regular file at path, up to max bytes. It
// checks the file before opening it (so a device is never opened: opening
// one can have effects of its own) and again once it is open (the path
// may have been replaced in between), and reads no more than max+1 bytes
// whatever the file claims (readAtMost). A file on a pseudo-filesystem
// (/proc, /sys) is refused: its size means nothing and reading it can
// block or consume it (/proc/kmsg).
//
// The file is opened with O_NONBLOCK so that opening a named pipe put in
// place between the checks returns at once instead of waiting for a
// writer; the check after opening then refuses it. That is all the flag
// does: reads of a regular file ignore it, and a read of anything else
// would park in Go's poller until data came, not fail. A read that blocks
// (a hung network or FUSE filesystem) is bounded only by manifestReads'
// timeout.
func readManifestFile(path string, max int64) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkFileInfo(info, max); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkOpened(f, max); err != nil {
		return nil, err
	}
	return readAtMost(f, max)
}

// readAtMost reads r to its end, but reads no more than max+1 bytes from
// it: past max it returns an error, so a file that grows, or lies about
// its size, or never ends, costs at most max+1 bytes of memory.
func readAtMost(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("it holds more than the %d-byte cap", max)
	}
	return data, nil
}

// checkOpened checks an opened manifest file: a regular file of at most
// max bytes, on a real filesystem.
func checkOpened(f *os.File, max int64) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if err := checkFileInfo(info, max); err != nil {
		return err
	}
	return checkFilesystem(f)
}

func checkFileInfo(info fs.FileInfo, max int64) error {
	switch mode := info.Mode(); {
	case mode.IsDir():
		return errIsDir
	case !mode.IsRegular():
		return fmt.Errorf("%w (%s)", errNotRegular, fileKind(mode))
	case info.Size() > max:
		return fmt.Errorf("it is %d bytes, more than the %d-byte cap", info.Size(), max)
	}
	return nil
}

func fileKind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + mode.String()
}

// manifestReads runs the reads of manifest files, each with a deadline,
// and keeps the files whose read is stuck past it from being read again
// until that read ends.
type manifestReads struct {
	read    func(path string, max int64) ([]byte, error)
	max     int64
	timeout time.Duration
	clock   clock.Clock

	mu sync.Mutex
	// stuck holds the paths whose read timed out and has not returned.
	stuck map[string]bool
}

func newManifestReads(max int64, timeout time.Duration, clk clock.Clock) *manifestReads {
	return &manifestReads{read: readManifestFile, max: max, timeout: timeout, clock: clk, stuck: map[string]bool{}}
}

// readResult is what one read gave.
type readResult struct {
	data []byte
	err  error
}

// readFile reads path within the read timeout. The read runs on a
// goroutine of its own; if it takes longer than the timeout, or ctx ends
// first, readFile returns an error and the read is abandoned: its
// goroutine ends when its system call returns, and until then path is not
// read again (its error is returned at once). No lock is held while
// reading.
func (m *manifestReads) readFile(ctx context.Context, path string) ([]byte, error) {
	m.mu.Lock()
	switch {
	case m.stuck[path]:
		m.mu.Unlock()
		// The same words as when it timed out, so it is reported once.
		return nil, m.timedOut()
	case len(m.stuck) >= maxStuckReads:
		m.mu.Unlock()
		return nil, fmt.Errorf("not read: %d reads of other manifest files are blocked", len(m.stuck))
	}
	m.mu.Unlock()

	// Unbuffered: the result is either taken by the caller or, once the
	// caller has given up, dropped by the reader, which then clears stuck.
	done := make(chan readResult)
	abandoned := make(chan struct{})
	go func() {
		data, err := m.read(path, m.max)
		select {
		case done <- readResult{data, err}:
		case <-abandoned:
			m.mu.Lock()
			delete(m.stuck, path)
			m.mu.Unlock()
		}
	}()
	timer := m.clock.NewTimer(m.timeout)
	defer timer.Stop()
	var why error
	select {
	case r := <-done:
		return r.data, r.err
	case <-timer.C():
		why = m.timedOut()
	case <-ctx.Done():
		why = ctx.Err()
	}
	m.mu.Lock()
	m.stuck[path] = true
	m.mu.Unlock()
	close(abandoned)
	// The read may have finished meanwhile: then it is not stuck.
	select {
	case r := <-done:
		m.mu.Lock()
		delete(m.stuck, path)
		m.mu.Unlock()
		return r.data, r.err
	default:
	}
	return nil, why
}

func (m *manifestReads) timedOut() error {
	return fmt.Errorf("reading it took more than %v; it is not read again until that read ends", m.timeout)
}

// blocked returns how many abandoned reads are still blocked.
func (m *manifestReads) blocked() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.stuck)
}
