package logshim

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MarkerEnv is the environment variable that makes a program linking this
// package run as a log shim (its value must be "1"): the package's init
// then runs Main and exits, before the program's own main or TestMain.
const MarkerEnv = "PODKIT_LOG_SHIM"

// The descriptors the shim is started with (exec.Cmd.ExtraFiles, in this
// order; an entry a mode does not use is nil): the read ends of the
// container's stdout and stderr pipes (with a terminal, fdStdout is its
// master and fdStderr is absent), its lock file, locked, the listening
// attach socket (ListenAttach), and the write end of the container's
// stdin pipe (Mode.Stdin without Mode.TTY).
const (
	fdStdout = 3
	fdStderr = 4
	fdLock   = 5
	fdAttach = 6
	fdStdin  = 7
)

// MinMaxSize is the smallest chunk size the shim accepts.
const MinMaxSize = 1 << 10

// Mode is what the shim holds of the container beside its output.
type Mode struct {
	// TTY: the container's stdin, stdout and stderr are a terminal whose
	// master the shim holds (fdStdout); its output, one stream, is logged
	// as stdout.
	TTY bool
	// Stdin: the shim holds the container's stdin (the terminal, or the
	// pipe of fdStdin) and passes attach sessions' input to it; without,
	// the container's stdin is not the shim's (the runtime gives it
	// /dev/null).
	Stdin bool
	// StdinOnce: the container's stdin closes once the first attach
	// session with input has ended (the container's stdinOnce).
	StdinOnce bool
}

// String encodes m as the shim's fifth argument.
func (m Mode) String() string {
	s := ""
	for _, f := range []struct {
		on   bool
		name string
	}{{m.TTY, "tty"}, {m.Stdin, "stdin"}, {m.StdinOnce, "once"}} {
		if f.on {
			if s != "" {
				s += ","
			}
			s += f.name
		}
	}
	if s == "" {
		return "-"
	}
	return s
}

func parseMode(s string) (Mode, error) {
	var m Mode
	if s == "-" {
		return m, nil
	}
	for _, f := range strings.Split(s, ",") {
		switch f {
		case "tty":
			m.TTY = true
		case "stdin":
			m.Stdin = true
		case "once":
			m.StdinOnce = true
		default:
			return m, fmt.Errorf("unknown mode %q", f)
		}
	}
	return m, nil
}

func init() {
	switch os.Getenv(MarkerEnv) {
	case "1":
	case SourceDigestMarker:
		if _, err := fmt.Println(SourceDigest()); err != nil {
			os.Exit(2)
		}
		os.Exit(0)
	default:
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
func Args(dir string, instance int, maxSize int64, maxFiles int, mode Mode) []string {
	return []string{dir, strconv.Itoa(instance), strconv.FormatInt(maxSize, 10), strconv.Itoa(maxFiles), mode.String()}
}

// Main is the shim: it copies the container's stdout and stderr (fds 3 and
// 4; with a terminal, its master on fd 3) into the instance's chunks, and
// to its attach sessions (fd 6, when there), until the output reaches end
// of file; then it ends the sessions, closes the chunk and returns. The
// lock (fd 5) is released when the process ends; its file stays, unlocked,
// until the instance's logs are pruned. args are those of Args.
func Main(args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("want 5 arguments (dir, instance, max size, max files, mode), got %d", len(args))
	}
	dir := args[0]
	instance, err1 := strconv.Atoi(args[1])
	maxSize, err2 := strconv.ParseInt(args[2], 10, 64)
	maxFiles, err3 := strconv.Atoi(args[3])
	mode, err4 := parseMode(args[4])
	if err := errors.Join(err1, err2, err3, err4); err != nil || instance < 0 || maxSize < MinMaxSize || maxFiles < 1 {
		return fmt.Errorf("bad arguments %q", args)
	}
	// The shim runs in a process group of its own, but signals meant for a
	// terminal or a writer must not end it before the container does.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGQUIT)
	if !open(fdLock) {
		return errors.New("no lock file on fd 5")
	}
	lock := os.NewFile(fdLock, "lock")
	s := &shim{w: newWriter(dir, instance, maxSize, maxFiles), maxText: min(MaxLine, int(maxSize)-MaxHeader)}
	inputs := []struct {
		fd     uintptr
		stream string
	}{{fdStdout, Stdout}, {fdStderr, Stderr}}
	if mode.TTY {
		inputs = inputs[:1]
	}
	files := make([]*os.File, len(inputs))
	for i, in := range inputs {
		if !open(int(in.fd)) {
			continue
		}
		// Non-blocking, so a read waits in the runtime's poller rather than
		// holding a thread.
		_ = syscall.SetNonblock(int(in.fd), true)
		files[i] = os.NewFile(in.fd, in.stream)
	}
	if open(fdAttach) {
		srv, err := attachServerOf(dir, instance, mode, files[0])
		if err != nil {
			return err
		}
		s.attach = srv
		srv.start()
	}
	var wg sync.WaitGroup
	for i, in := range inputs {
		if files[i] != nil {
			wg.Go(func() { s.copy(files[i], in.stream) })
		}
	}
	wg.Wait()
	if s.attach != nil {
		s.attach.finish()
	}
	s.mu.Lock()
	s.w.close()
	s.mu.Unlock()
	// Held to the end: the lock is released as the process exits.
	runtime.KeepAlive(lock)
	return nil
}

// attachServerOf makes the attach server of the listener on fdAttach,
// with the container's stdin (fdStdin, or the terminal master) as mode
// says.
func attachServerOf(dir string, instance int, mode Mode, output *os.File) (*attachServer, error) {
	lf := os.NewFile(fdAttach, "attach")
	l, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		return nil, fmt.Errorf("using the attach socket: %w", err)
	}
	var stdin, master *os.File
	switch {
	case mode.TTY:
		master = output
		if mode.Stdin {
			stdin = output
		}
	case mode.Stdin && open(fdStdin):
		_ = syscall.SetNonblock(fdStdin, true)
		stdin = os.NewFile(fdStdin, "stdin")
	}
	return newAttachServer(l.(*net.UnixListener), filepath.Join(dir, AttachSocketName(instance)), stdin, master, mode.StdinOnce), nil
}

// open reports whether fd is an open descriptor.
func open(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// shim holds the writer the two streams share.
type shim struct {
	mu      sync.Mutex
	w       *writer
	maxText int
	// attach serves the attach sessions; nil without.
	attach *attachServer
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
			s.toSessions(stream, buf[:n])
			return
		}
		s.w.flush()
		s.mu.Unlock()
		s.toSessions(stream, buf[:n])
	}
}

// toSessions gives the attach sessions what one read of stream got,
// once it is in the log: whatever a session has seen, a read of the log
// that starts after it has too.
func (s *shim) toSessions(stream string, data []byte) {
	if len(data) == 0 || s.attach == nil {
		return
	}
	typ := frameStdout
	if stream == Stderr {
		typ = frameStderr
	}
	s.attach.output(typ, data)
}
