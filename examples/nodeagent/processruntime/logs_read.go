package processruntime

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

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
	_, err := os.Lstat(filepath.Join(lr.dir, c.Name()))
	return err == nil
}

// open makes c the current chunk, read from offset. A chunk pruned
// meanwhile is current but unread.
func (lr *logReader) open(c logshim.Chunk, offset int64) error {
	if lr.rr != nil {
		lr.rr.f.Close()
		lr.rr = nil
	}
	lr.cur, lr.haveCur = c, true
	f, err := os.Open(filepath.Join(lr.dir, c.Name()))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
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

// start opens the chunk to begin with, at the offset TailLines chooses.
func (lr *logReader) start() error {
	chunks, err := logshim.InstanceChunks(lr.dir, lr.instance)
	if err != nil {
		return err
	}
	if lr.end != nil {
		for len(chunks) > 0 && chunks[len(chunks)-1].Seq > lr.end.Seq {
			chunks = chunks[:len(chunks)-1]
		}
	}
	if len(chunks) == 0 {
		return nil
	}
	if lr.opts.TailLines == nil {
		return lr.open(chunks[0], 0)
	}
	c, offset, err := lr.tailStart(chunks, *lr.opts.TailLines)
	if err != nil {
		return err
	}
	return lr.open(c, offset)
}

// tailStart finds where the last n lines begin: it counts the lines of
// the chunks from the newest back until it has n, reading each chunk once
// (and the one where they begin twice). A line ends with a full record;
// the partial records at the very end of the log (a line still being
// written, or the last one of an instance that ended without a newline)
// count as one more.
func (lr *logReader) tailStart(chunks []logshim.Chunk, n int64) (logshim.Chunk, int64, error) {
	last := len(chunks) - 1
	for i := last; i >= 0; i-- {
		full, trailing, size, err := lr.countLines(chunks[i])
		if err != nil {
			return logshim.Chunk{}, 0, err
		}
		if i == last && n == 0 {
			return chunks[i], size, nil
		}
		lines := full
		if i == last && trailing {
			lines++
		}
		if lines >= n {
			offset, err := lr.offsetAfterFull(chunks[i], lines-n)
			return chunks[i], offset, err
		}
		n -= lines
	}
	return chunks[0], 0, nil
}

// countLines counts the full records of a chunk, says whether its last
// record is partial, and returns the size read. A pruned chunk has none.
func (lr *logReader) countLines(c logshim.Chunk) (full int64, trailingPartial bool, size int64, err error) {
	err = lr.scan(c, func(line []byte, _ int64) bool {
		partial := recordPartial(line)
		if !partial {
			full++
		}
		trailingPartial = partial
		return true
	}, &size)
	return full, trailingPartial, size, err
}

// offsetAfterFull returns the offset just after the k-th full record of
// the chunk (0 for k = 0).
func (lr *logReader) offsetAfterFull(c logshim.Chunk, k int64) (int64, error) {
	var offset, seen int64
	if k == 0 {
		return 0, nil
	}
	err := lr.scan(c, func(line []byte, end int64) bool {
		if !recordPartial(line) {
			if seen++; seen == k {
				offset = end
				return false
			}
		}
		return true
	}, nil)
	return offset, err
}

// scan calls fn with each complete record of the chunk and the offset
// just after it, until fn returns false; size, if not nil, gets the
// offset where it stopped.
func (lr *logReader) scan(c logshim.Chunk, fn func(line []byte, end int64) bool, size *int64) error {
	f, err := os.Open(filepath.Join(lr.dir, c.Name()))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	rr := newRecordReader(f, 0)
	if lr.end != nil && c == *lr.end {
		rr.limit = lr.endSize
	}
	defer func() {
		if size != nil {
			*size = rr.off
		}
	}()
	for {
		line, err := rr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if !fn(line, rr.off) {
			return nil
		}
	}
}

// recordPartial reports whether a record is a P record, reading only its
// tag. A malformed record counts as full.
func recordPartial(line []byte) bool {
	_, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return false
	}
	_, rest, ok = bytes.Cut(rest, []byte{' '})
	return ok && len(rest) > 0 && rest[0] == logshim.TagPartial
}

// recordReader reads the complete records (lines) of a chunk from an
// offset, with a fixed buffer. A chunk is appended to while its shim
// writes: the bytes of a record not complete yet are kept until it is.
// A line longer than the buffer is not a record and is skipped.
type recordReader struct {
	f    *os.File
	buf  []byte
	r, w int
	// off is the file offset of buf[r].
	off int64
	// limit is the offset not to read at or beyond; -1: none.
	limit int64
	// skip: discarding a line too long for the buffer, up to its newline.
	skip bool
}

// recordBuffer is the record reader's buffer: far above the largest
// record a shim writes.
const recordBuffer = 4 * (logshim.MaxLine + logshim.MaxHeader)

func newRecordReader(f *os.File, offset int64) *recordReader {
	return &recordReader{f: f, buf: make([]byte, recordBuffer), off: offset, limit: -1}
}

// next returns the next complete record, without its newline, valid until
// the next call; io.EOF when there is none for now.
func (rr *recordReader) next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(rr.buf[rr.r:rr.w], '\n'); i >= 0 {
			line := rr.buf[rr.r : rr.r+i]
			rr.r += i + 1
			rr.off += int64(i + 1)
			if rr.skip {
				rr.skip = false
				continue
			}
			return line, nil
		}
		if rr.r > 0 {
			rr.w = copy(rr.buf, rr.buf[rr.r:rr.w])
			rr.r = 0
		}
		if rr.w == len(rr.buf) {
			rr.off += int64(rr.w)
			rr.w, rr.skip = 0, true
		}
		want := len(rr.buf) - rr.w
		if rr.limit >= 0 {
			left := rr.limit - rr.off - int64(rr.w)
			if left <= 0 {
				return nil, io.EOF
			}
			want = int(min(int64(want), left))
		}
		n, err := rr.f.Read(rr.buf[rr.w : rr.w+want])
		rr.w += n
		if n == 0 {
			if err == nil {
				err = io.EOF
			}
			return nil, err
		}
	}
}

// errLimitReached ends a read once LimitBytes are written.
var errLimitReached = errors.New("processruntime: log byte limit reached")

// logWriter buffers what ReadLogs writes to its caller's writer and stops
// at LimitBytes.
type logWriter struct {
	w  io.Writer
	bw *bufio.Writer
	// left is how many bytes may still be written; -1: no limit.
	left int64
}

func newLogWriter(w io.Writer, limit *int64) *logWriter {
	lw := &logWriter{w: w, bw: bufio.NewWriterSize(w, 32<<10), left: -1}
	if limit != nil {
		lw.left = *limit
	}
	return lw
}

// write writes p, or the part of it the limit allows; errLimitReached once
// the limit is reached.
func (lw *logWriter) write(p []byte) error {
	if lw.left >= 0 {
		if int64(len(p)) >= lw.left {
			p = p[:lw.left]
			lw.left = 0
			if _, err := lw.bw.Write(p); err != nil {
				return err
			}
			return errLimitReached
		}
		lw.left -= int64(len(p))
	}
	_, err := lw.bw.Write(p)
	return err
}

// flush writes out the buffer, then flushes the caller's writer if it can.
func (lw *logWriter) flush() error {
	if err := lw.bw.Flush(); err != nil {
		return err
	}
	switch f := lw.w.(type) {
	case interface{ Flush() error }:
		return f.Flush()
	case interface{ Flush() }:
		f.Flush()
	}
	return nil
}
