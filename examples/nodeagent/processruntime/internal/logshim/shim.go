package logshim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// MarkerEnv is the environment variable that makes a program linking this
// package run as a log shim (its value must be "1"): the package's init
// then runs Main and exits, before the program's own main or TestMain.
const MarkerEnv = "PODKIT_LOG_SHIM"

// The descriptors the shim is started with (exec.Cmd.ExtraFiles, in this
// order): the read ends of the container's stdout and stderr pipes, and
// its lock file, locked.
const (
	fdStdout = 3
	fdStderr = 4
	fdLock   = 5
)

// MinMaxSize is the smallest chunk size the shim accepts.
const MinMaxSize = 1 << 10

func init() {
	if os.Getenv(MarkerEnv) != "1" {
		return
	}
	if err := Main(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "podkit log shim: %v\n", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// Args are the shim's command-line arguments (after the program name) for
// an instance of the container whose log directory is dir.
func Args(dir string, instance int, maxSize int64, maxFiles int) []string {
	return []string{dir, strconv.Itoa(instance), strconv.FormatInt(maxSize, 10), strconv.Itoa(maxFiles)}
}

// Main is the shim: it copies the container's stdout and stderr (fds 3 and
// 4) into the instance's chunks until both reach end of file, then closes
// the chunk and returns. The lock (fd 5) is released when the process
// ends; its file stays, unlocked, until the instance's logs are pruned.
// args are those of Args.
func Main(args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("want 4 arguments (dir, instance, max size, max files), got %d", len(args))
	}
	dir := args[0]
	instance, err1 := strconv.Atoi(args[1])
	maxSize, err2 := strconv.ParseInt(args[2], 10, 64)
	maxFiles, err3 := strconv.Atoi(args[3])
	if err := errors.Join(err1, err2, err3); err != nil || instance < 0 || maxSize < MinMaxSize || maxFiles < 1 {
		return fmt.Errorf("bad arguments %q", args)
	}
	// The shim runs in a process group of its own, but signals meant for a
	// terminal or a writer must not end it before the container does.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGQUIT)
	lock := os.NewFile(fdLock, "lock")
	if lock == nil {
		return errors.New("no lock file on fd 5")
	}
	s := &shim{w: newWriter(dir, instance, maxSize, maxFiles), maxText: min(MaxLine, int(maxSize)-MaxHeader)}
	var wg sync.WaitGroup
	for _, in := range []struct {
		fd     uintptr
		stream string
	}{{fdStdout, Stdout}, {fdStderr, Stderr}} {
		// Non-blocking, so a read waits in the runtime's poller rather than
		// holding a thread.
		_ = syscall.SetNonblock(int(in.fd), true)
		f := os.NewFile(in.fd, in.stream)
		if f == nil {
			continue
		}
		wg.Go(func() { s.copy(f, in.stream) })
	}
	wg.Wait()
	s.mu.Lock()
	s.w.close()
	s.mu.Unlock()
	// Held to the end: the lock is released as the process exits.
	runtime.KeepAlive(lock)
	return nil
}

// shim holds the writer the two streams share.
type shim struct {
	mu      sync.Mutex
	w       *writer
	maxText int
}

// copy reads one stream until end of file and writes it as records: one
// batch (and one write) per read, every record of a batch stamped with
// the time of the read.
func (s *shim) copy(f *os.File, stream string) {
	defer f.Close()
	buf := make([]byte, 32<<10)
	// line is the stream's text since its last newline.
	line := make([]byte, 0, s.maxText)
	var ts []byte
	for {
		n, err := f.Read(buf)
		if n > 0 || err != nil {
			ts = time.Now().UTC().AppendFormat(ts[:0], TimeFormat)
		}
		s.mu.Lock()
		s.w.addLossNotice(ts)
		data := buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				take := min(len(data), s.maxText-len(line))
				line = append(line, data[:take]...)
				data = data[take:]
				if len(line) == s.maxText {
					s.w.add(ts, stream, TagPartial, line)
					line = line[:0]
				}
				continue
			}
			if len(line)+i > s.maxText {
				// The line's end does not fit with what is pending.
				take := s.maxText - len(line)
				line = append(line, data[:take]...)
				data = data[take:]
				s.w.add(ts, stream, TagPartial, line)
				line = line[:0]
				continue
			}
			if len(line) == 0 {
				s.w.add(ts, stream, TagFull, data[:i])
			} else {
				line = append(line, data[:i]...)
				s.w.add(ts, stream, TagFull, line)
				line = line[:0]
			}
			data = data[i+1:]
		}
		if err != nil {
			// End of file (or a broken pipe): text without a newline ends
			// as a partial record.
			if len(line) > 0 {
				s.w.add(ts, stream, TagPartial, line)
			}
			s.w.flush()
			s.mu.Unlock()
			return
		}
		s.w.flush()
		s.mu.Unlock()
	}
}
