package processruntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/logshim"
)

// Container logs. Each container instance (its first run, then each
// restart) gets a log shim, a process that drains its stdout and stderr
// into rotated files in the CRI log format, one record per line with its
// time and stream; ReadLogs reads them back as `kubectl logs` shows them.
// See the package doc (Logs) for the design and its limits.

// Defaults of the log cap, those of the kubelet's containerLogMaxSize and
// containerLogMaxFiles.
const (
	DefaultContainerLogMaxSize  = 10 << 20
	DefaultContainerLogMaxFiles = 5
)

// MinContainerLogMaxSize is the smallest Options.ContainerLogMaxSize.
const MinContainerLogMaxSize = logshim.MinMaxSize

// LogOptions select what ReadLogs writes; the meaning of each field is
// that of v1.PodLogOptions.
type LogOptions struct {
	// Follow keeps writing what the container instance writes until it
	// ends (and everything it wrote is written) or ctx ends.
	Follow bool
	// Previous reads the container's previous instance (the one before its
	// latest restart) instead of its current one.
	Previous bool
	// Timestamps starts each line with the time it was read from the
	// container (RFC 3339, nanoseconds, UTC) and a space.
	Timestamps bool
	// TailLines, when set, starts with the last TailLines lines (0: only
	// what comes next, with Follow). It must not be negative.
	TailLines *int64
	// SinceTime, when set, leaves out lines read from the container before
	// it.
	SinceTime *time.Time
	// LimitBytes, when set, stops after writing that many bytes (possibly
	// in the middle of a line). It must be positive.
	LimitBytes *int64
}

var (
	// ErrLogsNotFound is wrapped by the error of ReadLogs when there is no
	// such pod (or it was pruned), no such container in it, or, with
	// Previous, no previous instance (the container has not restarted).
	// Names that cannot name a container (such as "../x") are not found.
	ErrLogsNotFound = errors.New("processruntime: logs not found")
	// ErrInvalidLogOptions is wrapped by the error of ReadLogs when
	// LogOptions are out of range, or the writer is nil.
	ErrInvalidLogOptions = errors.New("processruntime: invalid log options")
)

// LogDir returns the directory holding the log files of a container of the
// pod (it may not exist): <instance>.<seq>.log chunks in the CRI log format
// (see the package doc), read with ReadLogs.
func (r *Runtime) LogDir(uid types.UID, container string) string {
	return containerLogDir(r.PodDir(uid), container)
}

// ReadLogs writes a container's log to w, as `kubectl logs` shows it: the
// text of each line the container's current instance (or, with Previous,
// its previous one) wrote to stdout or stderr, in the order the log shim
// read them, stdout and stderr interleaved, each line with its newline
// (a last line the container ended without one is written without one).
// A tombstone's logs are readable until PruneTombstones removes them.
//
// Without Follow it writes what the log holds when it is called and
// returns. With Follow it then writes each line as it is logged until the
// instance ends (its processes have ended, and every line they wrote is
// written) and returns nil, or until ctx ends (ctx.Err()) or the runtime
// closes (ErrClosed; after Close, ReadLogs still reads what the logs hold).
// It never busy-waits: it looks for more every
// Options.PollInterval, on the runtime's clock, and follows the log across
// its rotation. Lines rotated away before it reads them (a reader slower
// than the container, beyond the cap) are skipped.
//
// TailLines counts lines (a line split into partial records counts once),
// and is applied before SinceTime, as the kubelet does. When LimitBytes is
// reached ReadLogs returns nil.
//
// w is written from the calling goroutine only, in batches; when w has a
// Flush() or Flush() error method (an http.ResponseWriter, a bufio.Writer),
// it is called whenever ReadLogs has written all there is for now, so a
// follower sees lines as they come. An error writing to w is returned.
//
// The error wraps ErrLogsNotFound or ErrInvalidLogOptions for a request
// that cannot be served. ReadLogs may be called from any goroutine,
// concurrently with everything else; it holds no lock while it reads or
// writes.
func (r *Runtime) ReadLogs(ctx context.Context, uid types.UID, container string, opts LogOptions, w io.Writer) error {
	if err := validLogOptions(opts, w); err != nil {
		return err
	}
	if err := validUID(uid); err != nil {
		return fmt.Errorf("%w: %v", ErrLogsNotFound, err)
	}
	if !safeName(container) {
		return fmt.Errorf("%w: %q is not a container name", ErrLogsNotFound, container)
	}
	r.mu.Lock()
	p := r.pods[uid]
	if p == nil {
		r.mu.Unlock()
		return fmt.Errorf("%w: no pod %s on this node", ErrLogsNotFound, uid)
	}
	c := p.containers[container]
	if c == nil {
		r.mu.Unlock()
		return fmt.Errorf("%w: no container %q in pod %s/%s (%s)", ErrLogsNotFound, container, p.namespace, p.name, uid)
	}
	instance := c.rec.Restarts
	if opts.Previous {
		if instance == 0 {
			r.mu.Unlock()
			return fmt.Errorf("%w: container %q of pod %s/%s (%s) has no previous instance: it has not restarted", ErrLogsNotFound, container, p.namespace, p.name, uid)
		}
		instance--
	}
	dir := filepath.Join(p.dir, logsDir, container)
	r.mu.Unlock()

	lr := newLogReader(dir, instance, opts, w)
	defer lr.close()
	var err error
	if opts.Follow {
		err = r.follow(ctx, lr, func() bool { return r.logInstanceEnded(uid, container, dir, instance) })
	} else {
		err = lr.readAll(ctx)
	}
	if errors.Is(err, errLimitReached) {
		err = nil
	}
	if ferr := lr.out.flush(); err == nil && ferr != nil && !errors.Is(ferr, errLimitReached) {
		err = ferr
	}
	return err
}

func validLogOptions(opts LogOptions, w io.Writer) error {
	switch {
	case w == nil:
		return fmt.Errorf("%w: nil writer", ErrInvalidLogOptions)
	case opts.TailLines != nil && *opts.TailLines < 0:
		return fmt.Errorf("%w: TailLines must not be negative, got %d", ErrInvalidLogOptions, *opts.TailLines)
	case opts.LimitBytes != nil && *opts.LimitBytes <= 0:
		return fmt.Errorf("%w: LimitBytes must be positive, got %d", ErrInvalidLogOptions, *opts.LimitBytes)
	}
	return nil
}

// logInstanceEnded reports whether a container instance's log is
// complete: its shim has ended and no start of it is under way.
func (r *Runtime) logInstanceEnded(uid types.UID, container, dir string, instance int) bool {
	r.mu.Lock()
	starting := false
	if p := r.pods[uid]; p != nil {
		if c := p.containers[container]; c != nil {
			starting = c.starting && c.rec.Restarts == instance
		}
	}
	r.mu.Unlock()
	return !starting && !logshim.Running(dir, instance)
}

// follow runs lr until ended reports the instance over and lr has written
// everything, waiting PollInterval between looks.
func (r *Runtime) follow(ctx context.Context, lr *logReader, ended func() bool) error {
	tick := r.clock.NewTicker(r.poll)
	defer tick.Stop()
	for {
		if err := lr.catchUp(ctx); err != nil {
			return err
		}
		// Whatever the shim wrote before it ended is in the files now.
		over := ended()
		if err := lr.catchUp(ctx); err != nil {
			return err
		}
		if over {
			return nil
		}
		if err := lr.out.flush(); err != nil {
			return err
		}
		select {
		case <-tick.C():
		case <-ctx.Done():
			return ctx.Err()
		case <-r.closing:
			return ErrClosed
		}
	}
}
