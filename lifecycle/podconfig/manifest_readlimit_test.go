package podconfig

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// endless is a reader that never ends, like a file that keeps growing or
// a device that makes up bytes. It counts what it gives and, so that a
// reader that ignores the cap fails instead of filling memory, errors
// once it has given far more than any cap in these tests.
type endless struct{ given int64 }

var errReadTooFar = errors.New("endless: read far past the cap")

func (e *endless) Read(p []byte) (int, error) {
	if e.given > 1<<20 {
		return 0, errReadTooFar
	}
	for i := range p {
		p[i] = 'x'
	}
	e.given += int64(len(p))
	return len(p), nil
}

// chunks gives at most n bytes per Read, so a cap cannot be met by luck
// of the buffer sizes.
type chunks struct {
	r io.Reader
	n int
}

func (c chunks) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// readAtMost reads no more than max+1 bytes, whatever the reader holds.
func TestReadAtMost(t *testing.T) {
	const max = 1000
	t.Run("a reader that never ends", func(t *testing.T) {
		r := &endless{}
		data, err := readAtMost(chunks{r, 7}, max)
		require.Error(t, err)
		assert.NotErrorIs(t, err, errReadTooFar)
		assert.Contains(t, err.Error(), "more than the 1000-byte cap")
		assert.Nil(t, data)
		assert.Equal(t, int64(max+1), r.given, "it read max+1 bytes, no more")
	})
	t.Run("one byte over", func(t *testing.T) {
		_, err := readAtMost(strings.NewReader(strings.Repeat("x", max+1)), max)
		assert.ErrorContains(t, err, "more than the 1000-byte cap")
	})
	t.Run("exactly the cap", func(t *testing.T) {
		data, err := readAtMost(chunks{strings.NewReader(strings.Repeat("x", max)), 7}, max)
		require.NoError(t, err)
		assert.Len(t, data, max)
	})
	t.Run("empty", func(t *testing.T) {
		data, err := readAtMost(strings.NewReader(""), max)
		require.NoError(t, err)
		assert.Empty(t, data)
	})
	t.Run("a read error", func(t *testing.T) {
		_, err := readAtMost(io.MultiReader(strings.NewReader("ab"), errReader{}), max)
		assert.ErrorIs(t, err, errBroken)
	})
}

var errBroken = errors.New("broken")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBroken }
