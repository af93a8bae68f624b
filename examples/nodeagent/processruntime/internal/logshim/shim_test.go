package logshim

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readRecords parses every record of the chunks in dir, oldest first.
func readRecords(t *testing.T, dir string) []Record {
	t.Helper()
	chunks, err := Chunks(dir)
	require.NoError(t, err)
	var out []Record
	for _, c := range chunks {
		f, err := os.Open(filepath.Join(dir, c.Name()))
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			rec, err := ParseRecord(sc.Bytes())
			require.NoError(t, err, "%q", sc.Text())
			rec.Text = append([]byte(nil), rec.Text...)
			out = append(out, rec)
		}
		f.Close()
	}
	return out
}

func texts(recs []Record) []string {
	var out []string
	for _, r := range recs {
		tag := "F"
		if r.Partial {
			tag = "P"
		}
		out = append(out, r.Stream+" "+tag+" "+string(r.Text))
	}
	return out
}

// copyThroughPipe feeds writes into a shim's copy of one stream.
func copyThroughPipe(t *testing.T, s *shim, stream string, writes ...string) {
	t.Helper()
	rd, wr, err := os.Pipe()
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.copy(rd, stream)
	}()
	for _, w := range writes {
		_, err := wr.WriteString(w)
		require.NoError(t, err)
	}
	require.NoError(t, wr.Close())
	<-done
}

func TestShimSplitsLongLinesAndKeepsAMissingNewline(t *testing.T) {
	dir := t.TempDir()
	s := &shim{w: newWriter(dir, 0, 1<<20, 5), maxText: 8}
	copyThroughPipe(t, s, Stderr, "abc\n", "0123456789ABCDEF\n", "\n", "tail-no-", "newline")
	s.w.close()
	assert.Equal(t, []string{
		"stderr F abc",
		"stderr P 01234567",
		"stderr F 89ABCDEF",
		"stderr F ",
		"stderr P tail-no-",
		"stderr P newline",
	}, texts(readRecords(t, dir)))
}

func TestShimRotatesWithinTheCapAcrossInstances(t *testing.T) {
	dir := t.TempDir()
	const maxSize, maxFiles = 200, 3
	line := func(i int) string { return fmt.Sprintf("line %03d of instance", i) }
	for instance := range 3 {
		s := &shim{w: newWriter(dir, instance, maxSize, maxFiles), maxText: 100}
		var writes []string
		for i := range 40 {
			writes = append(writes, line(i)+"\n")
		}
		copyThroughPipe(t, s, Stdout, writes...)
		s.w.close()

		chunks, err := Chunks(dir)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(chunks), maxFiles, "instance %d: at most %d files", instance, maxFiles)
		for _, c := range chunks {
			fi, err := os.Stat(filepath.Join(dir, c.Name()))
			require.NoError(t, err)
			assert.LessOrEqual(t, fi.Size(), int64(maxSize), "chunk %s", c.Name())
			assert.GreaterOrEqual(t, c.Instance, instance-1, "instances before the previous one are gone")
		}
		// The newest lines are kept, in order, up to the last one.
		recs := readRecords(t, dir)
		require.NotEmpty(t, recs)
		got := texts(recs)
		assert.Equal(t, "stdout F "+line(39), got[len(got)-1])
		last := chunks[len(chunks)-1]
		assert.Equal(t, instance, last.Instance)
		assert.Greater(t, last.Seq, 2, "the instance rotated")
	}
}

func TestShimCountsWhatItCouldNotWriteAndSaysSo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	require.NoError(t, os.Mkdir(dir, 0o755))
	s := &shim{w: newWriter(dir, 0, 1<<20, 5), maxText: 100}
	copyThroughPipe(t, s, Stdout, "kept\n")
	s.w.rotate()
	require.NoError(t, os.RemoveAll(dir))
	copyThroughPipe(t, s, Stdout, "lost one\n", "lost two\n")
	require.NoError(t, os.Mkdir(dir, 0o755))
	copyThroughPipe(t, s, Stdout, "back\n")
	s.w.close()
	got := texts(readRecords(t, dir))
	require.Len(t, got, 2)
	assert.True(t, strings.HasPrefix(got[0], "stderr F podkit log shim: "), got[0])
	assert.Regexp(t, `lost [1-9][0-9]* bytes of log records: open .*no such file or directory`, got[0])
	assert.Equal(t, "stdout F back", got[1])
}
