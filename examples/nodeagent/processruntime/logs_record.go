package processruntime

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/logshim"
)

// This file holds the buffers between a log's chunks and ReadLogs' caller:
// a reader of whole records, and a writer that stops at LimitBytes.

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
