package logshim

import (
	"bytes"
	"errors"
	"time"
)

// Stream names, as the CRI log format spells them.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Tags: a full line (F) or a part of one (P).
const (
	TagFull    = 'F'
	TagPartial = 'P'
)

// TimeFormat is the format of a record's time (always UTC).
const TimeFormat = time.RFC3339Nano

// MaxHeader is the most bytes a record takes besides its text: the time
// (at most 30 bytes in UTC), the stream, the tag, three spaces and the
// newline.
const MaxHeader = 30 + 1 + len(Stdout) + 1 + 1 + 1 + 1

// MaxLine is the most text one record holds (16 KiB, as containerd); a
// longer line is split into partial records.
const MaxLine = 16 << 10

// AppendRecord appends one record to dst and returns the extended slice.
// text must not contain a newline.
func AppendRecord(dst []byte, t time.Time, stream string, tag byte, text []byte) []byte {
	dst = t.UTC().AppendFormat(dst, TimeFormat)
	dst = append(dst, ' ')
	dst = append(dst, stream...)
	dst = append(dst, ' ', tag, ' ')
	dst = append(dst, text...)
	return append(dst, '\n')
}

// Record is one parsed record. Text aliases the parsed line.
type Record struct {
	Time   time.Time
	Stream string
	// Partial is true for a P record: the line goes on in the stream's
	// next record.
	Partial bool
	Text    []byte
}

// ErrMalformed is returned by ParseRecord for a line that is not a record.
var ErrMalformed = errors.New("logshim: malformed log record")

// ParseRecord parses one record, without its newline.
func ParseRecord(line []byte) (Record, error) {
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return Record{}, ErrMalformed
	}
	t, err := time.Parse(TimeFormat, string(ts))
	if err != nil {
		return Record{}, ErrMalformed
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return Record{}, ErrMalformed
	}
	var rec Record
	switch string(stream) {
	case Stdout:
		rec.Stream = Stdout
	case Stderr:
		rec.Stream = Stderr
	default:
		return Record{}, ErrMalformed
	}
	if len(rest) < 2 || rest[1] != ' ' || (rest[0] != TagFull && rest[0] != TagPartial) {
		return Record{}, ErrMalformed
	}
	rec.Time, rec.Partial, rec.Text = t, rest[0] == TagPartial, rest[2:]
	return rec, nil
}
