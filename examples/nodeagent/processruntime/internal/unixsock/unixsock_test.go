//go:build linux

package unixsock_test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/unixsock"
)

// A socket at a path longer than a socket address holds is made (0600,
// replacing a stale file) and reached.
func TestAPathLongerThanAnAddress(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	require.NoError(t, os.Mkdir(dir, 0o700))
	path := filepath.Join(dir, "s.sock")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	f, err := unixsock.Listen(path, 4)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	l, err := net.FileListener(f)
	f.Close()
	require.NoError(t, err)
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hello"))
			c.Close()
		}
	}()
	c, err := unixsock.Dial(path)
	require.NoError(t, err)
	got, err := io.ReadAll(c)
	c.Close()
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	l.Close()

	_, err = unixsock.Dial(path)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "nothing listens any more")
	_, err = unixsock.Dial(filepath.Join(dir, "absent"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
