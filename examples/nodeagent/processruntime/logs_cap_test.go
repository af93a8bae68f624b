package processruntime_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// requireSeqSuffix checks that log is the lines n-k+1 ... n of `seq n`,
// for some k >= minLines.
func requireSeqSuffix(t *testing.T, log string, n, minLines int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), minLines, "lines kept")
	first, err := strconv.Atoi(lines[0])
	require.NoError(t, err, "first line %q", lines[0])
	for i, l := range lines {
		require.Equal(t, strconv.Itoa(first+i), l, "line %d of the log", i)
	}
	require.Equal(t, strconv.Itoa(n), lines[len(lines)-1], "the log ends with the last line written")
}

func TestContainerLogsStayWithinTheCapUnderAFloodAcrossRestarts(t *testing.T) {
	t.Parallel()
	const maxSize, maxFiles, lines, runs = 64 << 10, 3, 300000, 3
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, ContainerLogMaxSize: maxSize, ContainerLogMaxFiles: maxFiles, BackOff: time.Millisecond, MaxBackOff: time.Millisecond})
	pod := newPod(v1.RestartPolicyAlways, "flood", "seq "+strconv.Itoa(lines))
	dir := rt.LogDir(pod.UID, "flood")

	// Sample the log directory while the container floods it.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var maxTotal int64
	var maxCount, samples int
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			total, count := diskUse(t, dir)
			maxTotal, maxCount, samples = max(maxTotal, total), max(maxCount, count), samples+1
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	})

	for run := 1; run <= runs; run++ {
		for {
			_, err := syncPod(rt, pod)
			if err == nil {
				break
			}
			require.ErrorIs(t, err, processruntime.ErrBackOff)
		}
		ev.wait(t, "exit", exitedEvent(pod.UID, "flood", run))
	}
	close(stop)
	wg.Wait()
	terminate(t, rt, pod, 1)

	t.Logf("%d runs of %d lines (%d bytes each): at most %d bytes in %d files on disk over %d samples", runs, lines, seqBytes(lines), maxTotal, maxCount, samples)
	assert.LessOrEqual(t, maxTotal, int64(maxSize*maxFiles), "log bytes on disk")
	assert.LessOrEqual(t, maxCount, maxFiles, "log files on disk")
	total, files := dirBytes(t, dir)
	assert.LessOrEqual(t, total, int64(maxSize*maxFiles), "log bytes on disk at the end")
	assert.LessOrEqual(t, files, maxFiles, "log files on disk at the end")
	assert.Greater(t, total, int64(maxSize*(maxFiles-1)), "the cap is used, not emptied")

	// The newest lines are kept, in order, and end with the last written.
	log := readLogs(t, rt, pod.UID, "flood", processruntime.LogOptions{})
	requireSeqSuffix(t, log, lines, 1000)
	assert.Equal(t, strconv.Itoa(lines-1)+"\n"+strconv.Itoa(lines)+"\n", readLogs(t, rt, pod.UID, "flood", processruntime.LogOptions{TailLines: ptr[int64](2)}))
	assert.Equal(t, "", readLogs(t, rt, pod.UID, "flood", processruntime.LogOptions{Previous: true}), "the current instance's flood pushed the previous instance's logs out of the cap")
}

// diskUse measures the log files in dir: their total size and how many
// are not empty (a file just started is empty until the oldest beyond the
// cap is deleted). Listing a directory and reading sizes is no snapshot:
// it counts only the files listed both before and after their sizes were
// read. They all existed then, with at least the sizes read (a file only
// grows), so the figures never exceed what was on disk at that moment.
func diskUse(t *testing.T, dir string) (total int64, files int) {
	t.Helper()
	before := logFiles(t, dir)
	after := map[string]bool{}
	for _, f := range logFiles(t, dir) {
		after[f.name] = true
	}
	for _, f := range before {
		if after[f.name] && f.size > 0 {
			total += f.size
			files++
		}
	}
	return total, files
}

// seqBytes is the size of the output of `seq n`.
func seqBytes(n int) int {
	total := 0
	for i := 1; i <= n; i++ {
		total += len(strconv.Itoa(i)) + 1
	}
	return total
}

func TestFollowGoesAcrossRotationToTheContainersExit(t *testing.T) {
	t.Parallel()
	const lines = 20000
	ev := newEvents()
	// Small files, and enough of them that nothing is pruned before the
	// follower reads it, whatever its pace.
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, ContainerLogMaxSize: 1 << 10, ContainerLogMaxFiles: 1000})
	pod := newPod(v1.RestartPolicyNever, "c", waitFor("go")+"; seq "+strconv.Itoa(lines)+"; printf end")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })

	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- rt.ReadLogs(context.Background(), pod.UID, "c", processruntime.LogOptions{Follow: true}, &out)
	}()
	touch(t, rt, pod.UID, "go")
	select {
	case err := <-done:
		require.NoError(t, err, "the follower ends when the container does")
	case <-time.After(2 * time.Minute): // a bound against a hang, on a loaded machine
		t.Fatal("the follower did not end within 2 minutes of the container's exit")
	}
	log := out.String()
	require.True(t, strings.HasSuffix(log, "\nend"), "everything the container wrote was delivered, up to its last byte")
	requireSeqSuffix(t, strings.TrimSuffix(log, "end"), lines, lines)
	assert.Greater(t, len(logFiles(t, rt.LogDir(pod.UID, "c"))), 50, "the log rotated many times")
}

func TestFollowEndsWithItsContext(t *testing.T) {
	t.Parallel()
	rt := openRuntime(t, processruntime.Options{})
	pod := newPod(v1.RestartPolicyNever, "c", "echo started; exec sleep 300")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })

	ctx, cancel := context.WithCancel(context.Background())
	w := &notifyingWriter{wrote: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() { done <- rt.ReadLogs(ctx, pod.UID, "c", processruntime.LogOptions{Follow: true}, w) }()
	select {
	case <-w.wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower wrote nothing within 10s")
	}
	cancel()
	select {
	case err := <-done:
		require.True(t, errors.Is(err, context.Canceled), "got %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not end with its context")
	}
	assert.Equal(t, "started\n", w.String())
	assert.Positive(t, w.flushes(), "a follower flushes its writer when it has caught up")
}

// notifyingWriter is a writer with a Flush method that signals its first
// write.
type notifyingWriter struct {
	mu      sync.Mutex
	b       strings.Builder
	flushed int
	wrote   chan struct{}
}

func (w *notifyingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return w.b.Write(p)
}

func (w *notifyingWriter) Flush() {
	w.mu.Lock()
	w.flushed++
	w.mu.Unlock()
}

func (w *notifyingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *notifyingWriter) flushes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushed
}
