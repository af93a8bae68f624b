package logshim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		stream string
		tag    byte
		text   string
	}{
		{Stdout, TagFull, "hello world"},
		{Stderr, TagPartial, "  spaces  and\ttabs "},
		{Stdout, TagFull, ""},
	} {
		line := AppendRecord(nil, at, tc.stream, tc.tag, []byte(tc.text))
		require.Equal(t, byte('\n'), line[len(line)-1])
		assert.LessOrEqual(t, len(line), MaxHeader+len(tc.text))
		rec, err := ParseRecord(line[:len(line)-1])
		require.NoError(t, err, "%q", line)
		assert.True(t, rec.Time.Equal(at))
		assert.Equal(t, time.UTC, rec.Time.Location(), "records are in UTC")
		assert.Equal(t, tc.stream, rec.Stream)
		assert.Equal(t, tc.tag == TagPartial, rec.Partial)
		assert.Equal(t, tc.text, string(rec.Text))
	}
	assert.Equal(t, "2026-12-01T06:08:09.123456789Z stdout F hi\n", string(AppendRecord(nil, at, Stdout, TagFull, []byte("hi"))), "the CRI log format")
}

func TestParseRecordRejectsWhatIsNotARecord(t *testing.T) {
	for _, line := range []string{
		"",
		"hello",
		"2026-12-01T06:08:09Z",
		"2026-12-01T06:08:09Z stdout",
		"2026-12-01T06:08:09Z stdout F",
		"2026-12-01T06:08:09Z stdin F x",
		"2026-12-01T06:08:09Z stdout X x",
		"2026-12-01T06:08:09Z stdout Fx",
		"yesterday stdout F x",
	} {
		_, err := ParseRecord([]byte(line))
		assert.ErrorIs(t, err, ErrMalformed, "%q", line)
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add([]byte("2026-12-01T06:08:09.5Z stderr P part"))
	f.Add([]byte("2026-12-01T06:08:09+02:00 stdout F x y"))
	f.Add([]byte("x y z"))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := ParseRecord(line)
		if err != nil {
			return
		}
		// What parses encodes back to a record with the same content.
		tag := byte(TagFull)
		if rec.Partial {
			tag = TagPartial
		}
		out := AppendRecord(nil, rec.Time, rec.Stream, tag, rec.Text)
		again, err := ParseRecord(out[:len(out)-1])
		require.NoError(t, err, "%q", out)
		assert.True(t, again.Time.Equal(rec.Time))
		assert.Equal(t, rec.Stream, again.Stream)
		assert.Equal(t, rec.Partial, again.Partial)
		assert.Equal(t, rec.Text, again.Text)
	})
}
