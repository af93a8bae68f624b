package processruntime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/logshim"
)

// This file reads a container instance's chunks (see the logshim package)
// and writes their lines as ReadLogs promises.

// logReader reads the chunks of one container instance in order, from a
// start that TailLines chooses, and writes the records LogOptions select.
// Its memory is bounded: one record buffer and one output buffer.
type logReader struct {
	dir      string
	instance int
	opts     LogOptions
	out      *logWriter
	// started: the start position was chosen and the first chunk opened.
	started bool
	// cur is the chunk being read (valid when haveCur); rr reads it, nil
	// when it could not be opened (it was pruned).
	cur     logshim.Chunk
	haveCur bool
	rr      *recordReader
	// end, when set, is the last chunk to read and endSize how much of it:
	// what the log held when a read without Follow began.
	end     *logshim.Chunk
	endSize int64
	// midLine: the stream's last record was partial, so its next one
	// continues a line (index 0 stdout, 1 stderr).
	midLine [2]bool
	// records counts records read, to look at ctx now and then.
	records int
}

func newLogReader(dir string, instance int, opts LogOptions, w io.Writer) *logReader {
	return &logReader{dir: dir, instance: instance, opts: opts, out: newLogWriter(w, opts.LimitBytes)}
}

// readAll writes what the instance's log holds now.
func (lr *logReader) readAll(ctx context.Context) error {
	chunks, err := logshim.InstanceChunks(lr.dir, lr.instance)
	if err != nil || len(chunks) == 0 {
		return err
	}
	last := chunks[len(chunks)-1]
	fi, err := os.Stat(filepath.Join(lr.dir, last.Name()))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	lr.end, lr.endSize = &last, fi.Size()
	return lr.catchUp(ctx)
}

// catchUp writes every complete record the log holds beyond what was
// written already, moving on from chunk to chunk.
func (lr *logReader) catchUp(ctx context.Context) error {
	if !lr.started {
		if err := lr.start(); err != nil {
			return err
		}
		lr.started = true
	}
	for {
		if err := lr.drain(ctx); err != nil {
			return err
		}
		next, ok, err := lr.nextChunk()
		if err != nil || !ok {
			return err
		}
		// The shim finished the current chunk before starting the next:
		// what it wrote to it meanwhile is there now.
		if err := lr.drain(ctx); err != nil {
			return err
		}
		if err := lr.open(next, 0); err != nil {
			return err
		}
	}
}

// drain writes the complete records of the current chunk not written yet.
func (lr *logReader) drain(ctx context.Context) error {
	if lr.rr == nil {
		return nil
	}
	for {
		line, err := lr.rr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if lr.records++; lr.records%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := lr.emit(line); err != nil {
			return err
		}
	}
}

// nextChunk finds the chunk after the current one (the first one when
// none is current yet): the next by number when it exists, else the first
// later one, when chunks were pruned before this reader got to them.
//
// A directory listing is no snapshot: one taken while the shim starts a
// chunk may miss a chunk created before another it shows. So chunks are
// looked for by name first, and a listing only tells how far to look.
func (lr *logReader) nextChunk() (logshim.Chunk, bool, error) {
	if lr.end != nil && lr.haveCur && lr.cur == *lr.end {
		return logshim.Chunk{}, false, nil
	}
	if lr.haveCur {
		if c := (logshim.Chunk{Instance: lr.instance, Seq: lr.cur.Seq + 1}); lr.exists(c) {
			return c, true, nil
		}
	}
	chunks, err := logshim.InstanceChunks(lr.dir, lr.instance)
	if err != nil {
		return logshim.Chunk{}, false, err
	}
	for _, c := range chunks {
		if lr.end != nil && c.Seq > lr.end.Seq {
			break
		}
		if lr.haveCur && c.Seq <= lr.cur.Seq {
			continue
		}
		// Chunks before c that the listing missed come first. Only chunks
		// started while it was taken can be missed: a few, just before c
		// (further back, the chunks were pruned).
		from := max(c.Seq-maxMissedChunks, 0)
		if lr.haveCur {
			from = max(from, lr.cur.Seq+1)
		}
		for seq := from; seq < c.Seq; seq++ {
			if b := (logshim.Chunk{Instance: lr.instance, Seq: seq}); lr.exists(b) {
				return b, true, nil
			}
		}
		return c, true, nil
	}
	return logshim.Chunk{}, false, nil
}

// maxMissedChunks bounds how many chunks nextChunk looks for by name
// before the first one a listing shows.
const maxMissedChunks = 64

// exists reports whether chunk c is in the directory.
func (lr *logReader) exists(c logshim.Chunk) bool {
	fi, err := os.Lstat(filepath.Join(lr.dir, c.Name()))
	return err == nil && fi.Mode().IsRegular()
}

// chunkGone reports whether an error opening a chunk means it is not
// there to read: pruned, or not a file the shim made.
func chunkGone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ELOOP)
}

// openChunk opens chunk c for reading. A chunk is a regular file the shim
// made: a symbolic link in its place is not followed.
func (lr *logReader) openChunk(c logshim.Chunk) (*os.File, error) {
	return os.OpenFile(filepath.Join(lr.dir, c.Name()), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// open makes c the current chunk, read from offset. A chunk pruned
// meanwhile is current but unread.
func (lr *logReader) open(c logshim.Chunk, offset int64) error {
	if lr.rr != nil {
		lr.rr.f.Close()
		lr.rr = nil
	}
	lr.cur, lr.haveCur = c, true
	f, err := lr.openChunk(c)
	if err != nil {
		if chunkGone(err) {
			return nil
		}
		return err
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return err
		}
	}
	lr.rr = newRecordReader(f, offset)
	if lr.end != nil && c == *lr.end {
		lr.rr.limit = lr.endSize
	}
	return nil
}

// close releases the open chunk.
func (lr *logReader) close() {
	if lr.rr != nil {
		lr.rr.f.Close()
		lr.rr = nil
	}
}

// emit writes one record as LogOptions say.
func (lr *logReader) emit(line []byte) error {
	rec, err := logshim.ParseRecord(line)
	if err != nil {
		// Not written by a shim (the file was tampered with): skipped.
		return nil
	}
	s := 0
	if rec.Stream == logshim.Stderr {
		s = 1
	}
	lineStart := !lr.midLine[s]
	lr.midLine[s] = rec.Partial
	if lr.opts.SinceTime != nil && rec.Time.Before(*lr.opts.SinceTime) {
		return nil
	}
	if lr.opts.Timestamps && lineStart {
		// The record's own time field, already RFC 3339 in UTC.
		ts, _, _ := bytes.Cut(line, []byte{' '})
		if err := lr.out.write(ts); err != nil {
			return err
		}
		if err := lr.out.write([]byte{' '}); err != nil {
			return err
		}
	}
	if err := lr.out.write(rec.Text); err != nil {
		return err
	}
	if !rec.Partial {
		return lr.out.write([]byte{'\n'})
	}
	return nil
}
