package simcloud

import (
	"time"
)

// MaxLogBytes caps what the cloud keeps of one container's output: older
// lines are dropped first (a client asking for more gets what is left).
const MaxLogBytes = 1 << 20

// logLine is one line of a container's output.
type logLine struct {
	at   time.Time
	text []byte // with its newline
}

// output is one container's output: its log (bounded by MaxLogBytes), and
// a channel closed at every write so that attached clients and followers
// wake up. Guarded by the cloud's lock.
type output struct {
	lines []logLine
	size  int
	// written counts the lines ever written, so that a reader knows
	// which ones it has not seen (dropped lines included).
	written int
	changed chan struct{}
	// pending holds the last line while it has no newline yet.
	pending []byte
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

// write appends data, split into lines, at time at. A partial last line
// is completed by a later write.
func (o *output) write(at time.Time, data []byte) {
	for len(data) > 0 {
		i := indexNewline(data)
		if i < 0 {
			o.pending = append(o.pending, data...)
			break
		}
		line := append(o.pending, data[:i+1]...)
		o.pending = nil
		data = data[i+1:]
		o.lines = append(o.lines, logLine{at: at, text: line})
		o.size += len(line)
		o.written++
		for o.size > MaxLogBytes && len(o.lines) > 1 {
			o.size -= len(o.lines[0].text)
			o.lines = o.lines[1:]
		}
	}
	o.wake()
}

// wake wakes those waiting for a change.
func (o *output) wake() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// since returns the lines written after the first n, and the new count.
func (o *output) since(n int) ([]logLine, int) {
	kept := o.written - len(o.lines)
	if n < kept {
		n = kept
	}
	return append([]logLine(nil), o.lines[n-kept:]...), o.written
}

func indexNewline(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}
