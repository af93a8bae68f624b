package logshim

import (
	"fmt"
	"os"
	"path/filepath"
)

// flushAt is how many bytes of records the writer buffers at most before
// it writes them out.
const flushAt = 256 << 10

// writer writes the records of one instance to its chunks: it starts the
// next chunk when a record would not fit in the current one, and prunes
// the directory whenever it starts a chunk. It never fails: what cannot
// be written is counted, and a record saying how much was lost is written
// once writing works again. It is not safe for concurrent use.
type writer struct {
	dir      string
	maxSize  int64
	maxFiles int
	chunk    Chunk
	// f is the open chunk, nil until its first write.
	f    *os.File
	size int64
	buf  []byte
	// lost counts bytes dropped since the last loss notice; lostErr is the
	// latest reason. notice is how many bytes at the start of buf are a
	// loss notice, which reports noticeLost bytes: if it cannot be written
	// either, those count as lost again, and the notice itself does not.
	lost       int64
	lostErr    error
	notice     int
	noticeLost int64
}

// newWriter returns a writer for instance in dir. It continues after the
// instance's last chunk, if any.
func newWriter(dir string, instance int, maxSize int64, maxFiles int) *writer {
	w := &writer{dir: dir, maxSize: maxSize, maxFiles: maxFiles, chunk: Chunk{Instance: instance}}
	if existing, err := InstanceChunks(dir, instance); err == nil && len(existing) > 0 {
		w.chunk.Seq = existing[len(existing)-1].Seq + 1
	}
	return w
}

// add adds one record (ts and text must fit a record of at most maxSize
// bytes) to the chunk, starting the next chunk first if it would not fit.
func (w *writer) add(ts []byte, stream string, tag byte, text []byte) {
	n := int64(len(ts) + 1 + len(stream) + 3 + len(text) + 1)
	if used := w.size + int64(len(w.buf)); used > 0 && used+n > w.maxSize {
		w.flush()
		w.rotate()
	}
	w.buf = append(w.buf, ts...)
	w.buf = append(w.buf, ' ')
	w.buf = append(w.buf, stream...)
	w.buf = append(w.buf, ' ', tag, ' ')
	w.buf = append(w.buf, text...)
	w.buf = append(w.buf, '\n')
	if len(w.buf) >= flushAt {
		w.flush()
	}
}

// addLossNotice adds, when output was lost since the last notice, a
// stderr record saying how much and why.
func (w *writer) addLossNotice(ts []byte) {
	if w.lost == 0 {
		return
	}
	text := fmt.Appendf(nil, "podkit log shim: lost %d bytes of log records: %v", w.lost, w.lostErr)
	lost := w.lost
	w.lost, w.lostErr = 0, nil
	w.add(ts, Stderr, TagFull, text)
	// The notice is alone in buf unless add wrote out what was before it.
	if int64(len(w.buf)) == int64(len(ts)+1+len(Stderr)+3+len(text)+1) {
		w.notice, w.noticeLost = len(w.buf), lost
	}
}

// flush writes the buffered records to the current chunk, creating it
// (and pruning the directory) on its first write.
func (w *writer) flush() {
	if len(w.buf) == 0 {
		return
	}
	notice, noticeLost := w.notice, w.noticeLost
	w.notice, w.noticeLost = 0, 0
	drop := func(err error) {
		w.lost += int64(len(w.buf) - notice)
		if notice > 0 {
			w.lost += noticeLost
		}
		w.lostErr = err
		w.buf = w.buf[:0]
	}
	if w.f == nil {
		f, err := os.OpenFile(filepath.Join(w.dir, w.chunk.Name()), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			drop(err)
			return
		}
		w.f, w.size = f, 0
		if fi, err := f.Stat(); err == nil {
			w.size = fi.Size()
		}
		prune(w.dir, w.chunk, w.chunk.Instance-1, w.maxFiles)
	}
	if _, err := w.f.Write(w.buf); err != nil {
		// Cut a partly written record off, so the chunk holds whole
		// records only.
		_ = w.f.Truncate(w.size)
		drop(err)
		return
	}
	w.size += int64(len(w.buf))
	w.buf = w.buf[:0]
}

// rotate closes the current chunk; the next write starts the next one.
func (w *writer) rotate() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	w.size = 0
	w.chunk.Seq++
}

// close writes what is buffered and closes the chunk.
func (w *writer) close() {
	w.flush()
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}
