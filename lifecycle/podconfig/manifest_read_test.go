package podconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  containers:
  - {name: main, image: main:1}
`

// stuckReader reads files as readManifestFile does, except those named
// stuck*.yaml, whose read blocks until release is closed (like a read on
// a hung filesystem) and then gives a valid pod.
type stuckReader struct {
	release chan struct{}
	mu      sync.Mutex
	calls   map[string]int
}

func (r *stuckReader) read(path string, max int64) ([]byte, error) {
	name := filepath.Base(path)
	r.mu.Lock()
	r.calls[name]++
	r.mu.Unlock()
	if !strings.HasPrefix(name, "stuck") {
		return readManifestFile(path, max)
	}
	<-r.release
	return fmt.Appendf(nil, podYAML, strings.TrimSuffix(name, ".yaml")), nil
}

func (r *stuckReader) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[name]
}

// recorded collects event messages.
type recorded struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorded) Eventf(_ runtime.Object, _, reason, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, reason+": "+fmt.Sprintf(format, args...))
}

func (r *recorded) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

func newStuckSource(t *testing.T, files ...string) (*ManifestSource, *stuckReader, *recorded) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), fmt.Appendf(nil, podYAML, strings.TrimSuffix(f, ".yaml")), 0o644))
	}
	rec := &recorded{}
	src, err := NewManifestSource(dir, ManifestOptions{NodeName: "node-a", Recorder: rec})
	require.NoError(t, err)
	r := &stuckReader{release: make(chan struct{}), calls: map[string]int{}}
	src.reads.read = r.read
	return src, r, rec
}

func podNames(t *testing.T, src *ManifestSource) []string {
	t.Helper()
	pods, _, err := src.Scan()
	require.NoError(t, err)
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// A read that blocks past the read timeout is abandoned: the scan goes on
// without the file, which is reported once and not read again until that
// read returns.
func TestAStuckReadIsAbandonedAndNotRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, r, rec := newStuckSource(t, "good.yaml", "stuck.yaml")
		start := time.Now()
		assert.Equal(t, []string{"good-node-a"}, podNames(t, src))
		assert.Equal(t, DefaultManifestReadTimeout, time.Since(start), "the scan waited out the read timeout, no more")
		require.Len(t, rec.all(), 1)
		assert.Contains(t, rec.all()[0], "stuck.yaml is ignored until it is fixed: reading it: reading it took more than 5s")

		start = time.Now()
		assert.Equal(t, []string{"good-node-a"}, podNames(t, src))
		assert.Zero(t, time.Since(start), "a file whose read is still blocked is not waited for again")
		assert.Equal(t, 1, r.count("stuck.yaml"), "nor read again")
		assert.Len(t, rec.all(), 1, "nor reported again")
		assert.Equal(t, 1, src.reads.blocked())

		close(r.release)
		synctest.Wait()
		assert.Zero(t, src.reads.blocked(), "the abandoned read returned")
		assert.Equal(t, []string{"good-node-a", "stuck-node-a"}, podNames(t, src), "once the read returned, the file is read again")
		assert.Equal(t, 2, r.count("stuck.yaml"))
	})
}

// Run returns as soon as its context ends, in the middle of a read that
// blocks.
func TestRunDoesNotWaitForAStuckRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, r, _ := newStuckSource(t, "stuck.yaml")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- src.Run(ctx, PodSinkFunc(func(context.Context, string, []*v1.Pod) error { return nil }))
		}()
		synctest.Wait()
		require.Equal(t, 1, r.count("stuck.yaml"), "the read is blocked")
		cancel()
		synctest.Wait()
		select {
		case err := <-done:
			require.NoError(t, err)
		default:
			t.Fatal("Run waits for a read that blocks")
		}
		close(r.release)
	})
}

// Reads that stay blocked are bounded: past maxStuckReads, no file is
// read until one of them returns.
func TestStuckReadsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var files []string
		for i := range maxStuckReads + 1 {
			files = append(files, fmt.Sprintf("stuck-%02d.yaml", i))
		}
		src, r, rec := newStuckSource(t, append(files, "z-good.yaml")...)
		assert.Empty(t, podNames(t, src))
		assert.Equal(t, maxStuckReads, src.reads.blocked())
		assert.Zero(t, r.count(files[maxStuckReads]), "the read past the bound was not started")
		assert.Zero(t, r.count("z-good.yaml"))
		msgs := rec.all()
		require.Len(t, msgs, maxStuckReads+2)
		assert.Contains(t, msgs[maxStuckReads+1], fmt.Sprintf("not read: %d reads of other manifest files are blocked", maxStuckReads))
		close(r.release)
		synctest.Wait()
		assert.Len(t, podNames(t, src), maxStuckReads+2)
	})
}

// A named pipe put in place of a checked file is caught once opened.
func TestCheckOpenedRefusesANamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer f.Close()
	err = checkOpened(f, DefaultMaxManifestSize)
	assert.True(t, errors.Is(err, errNotRegular), "%v", err)
}
