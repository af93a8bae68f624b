package processruntime

import (
	"bytes"
	"errors"
	"io"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/logshim"
)

// This file chooses where a read of a container's log begins: at its
// start, or TailLines lines before its end.

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
	f, err := lr.openChunk(c)
	if err != nil {
		if chunkGone(err) {
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
