package processruntime_test

import (
	"context"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// steppedLogPod runs a container that writes four lines, each read by its
// log shim at a later time than the one before (the test lets it go on
// only once the previous line is in the log), the second on stderr and the
// last without a newline: "one\nerr-one\ntwo\nthree".
func steppedLogPod(t *testing.T) (*processruntime.Runtime, *v1.Pod) {
	t.Helper()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "c", "echo one; "+waitFor("s1")+"; echo err-one >&2; "+waitFor("s2")+"; echo two; "+waitFor("s3")+"; printf three")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	waitLog(t, rt, pod.UID, "c", "one\n")
	touch(t, rt, pod.UID, "s1")
	waitLog(t, rt, pod.UID, "c", "err-one\n")
	touch(t, rt, pod.UID, "s2")
	waitLog(t, rt, pod.UID, "c", "two\n")
	touch(t, rt, pod.UID, "s3")
	ev.wait(t, "exit", exitedEvent(pod.UID, "c", 1))
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	return rt, pod
}

// timedLines splits a log read with Timestamps into times and texts.
func timedLines(t *testing.T, log string) ([]time.Time, []string) {
	t.Helper()
	var times []time.Time
	var texts []string
	for line := range strings.Lines(log) {
		ts, text, ok := strings.Cut(line, " ")
		require.True(t, ok, "a timestamp starts %q", line)
		tm, err := time.Parse(time.RFC3339Nano, ts)
		require.NoError(t, err, "the timestamp of %q", line)
		times = append(times, tm)
		texts = append(texts, text)
	}
	return times, texts
}

func TestReadLogsOptions(t *testing.T) {
	t.Parallel()
	rt, pod := steppedLogPod(t)
	read := func(opts processruntime.LogOptions) string {
		return readLogs(t, rt, pod.UID, "c", opts)
	}
	const all = "one\nerr-one\ntwo\nthree"
	require.Equal(t, all, read(processruntime.LogOptions{}), "stdout and stderr in order; the last line without its missing newline")

	times, texts := timedLines(t, read(processruntime.LogOptions{Timestamps: true}))
	require.Equal(t, []string{"one\n", "err-one\n", "two\n", "three"}, texts)
	for i := 1; i < len(times); i++ {
		assert.True(t, times[i].After(times[i-1]), "line %d was read after line %d", i, i-1)
	}
	assert.Equal(t, time.UTC, times[0].Location())

	cases := []struct {
		name string
		opts processruntime.LogOptions
		want string
	}{
		{"tail 2", processruntime.LogOptions{TailLines: ptr[int64](2)}, "two\nthree"},
		{"tail 1 is the line without newline", processruntime.LogOptions{TailLines: ptr[int64](1)}, "three"},
		{"tail 0", processruntime.LogOptions{TailLines: ptr[int64](0)}, ""},
		{"tail beyond the log", processruntime.LogOptions{TailLines: ptr[int64](10)}, all},
		{"huge tail", processruntime.LogOptions{TailLines: ptr[int64](math.MaxInt64)}, all},
		{"since the second line", processruntime.LogOptions{SinceTime: &times[1]}, "err-one\ntwo\nthree"},
		{"since after the end", processruntime.LogOptions{SinceTime: ptr(times[3].Add(time.Nanosecond))}, ""},
		{"tail before since", processruntime.LogOptions{TailLines: ptr[int64](3), SinceTime: &times[2]}, "two\nthree"},
		{"limit within a line", processruntime.LogOptions{LimitBytes: ptr[int64](6)}, "one\ner"},
		{"limit at the end", processruntime.LogOptions{LimitBytes: ptr[int64](int64(len(all)))}, all},
		{"huge limit", processruntime.LogOptions{LimitBytes: ptr[int64](math.MaxInt64)}, all},
		{"limit counts timestamps", processruntime.LogOptions{Timestamps: true, LimitBytes: ptr[int64](10)}, times[0].Format(time.RFC3339Nano)[:10]},
		{"follow of an ended instance returns", processruntime.LogOptions{Follow: true, TailLines: ptr[int64](1)}, "three"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, read(tc.opts))
		})
	}
	t.Run("timestamps with tail", func(t *testing.T) {
		_, texts := timedLines(t, read(processruntime.LogOptions{Timestamps: true, TailLines: ptr[int64](2)}))
		assert.Equal(t, []string{"two\n", "three"}, texts)
	})
}

func TestReadLogsRejectsBadRequests(t *testing.T) {
	t.Parallel()
	rt, pod := steppedLogPod(t)
	cases := []struct {
		name      string
		uid       types.UID
		container string
		opts      processruntime.LogOptions
		w         io.Writer
		want      error
		message   string
	}{
		{"negative tail", pod.UID, "c", processruntime.LogOptions{TailLines: ptr[int64](-1)}, io.Discard, processruntime.ErrInvalidLogOptions, "TailLines must not be negative, got -1"},
		{"zero limit", pod.UID, "c", processruntime.LogOptions{LimitBytes: ptr[int64](0)}, io.Discard, processruntime.ErrInvalidLogOptions, "LimitBytes must be positive, got 0"},
		{"negative limit", pod.UID, "c", processruntime.LogOptions{LimitBytes: ptr[int64](-5)}, io.Discard, processruntime.ErrInvalidLogOptions, "LimitBytes must be positive"},
		{"nil writer", pod.UID, "c", processruntime.LogOptions{}, nil, processruntime.ErrInvalidLogOptions, "nil writer"},
		{"unknown container", pod.UID, "nope", processruntime.LogOptions{}, io.Discard, processruntime.ErrLogsNotFound, `no container "nope" in pod test/` + pod.Name},
		{"path-ish container", pod.UID, "../c", processruntime.LogOptions{}, io.Discard, processruntime.ErrLogsNotFound, `"../c" is not a container name`},
		{"dot-dot container", pod.UID, "..", processruntime.LogOptions{}, io.Discard, processruntime.ErrLogsNotFound, `".." is not a container name`},
		{"empty container", pod.UID, "", processruntime.LogOptions{}, io.Discard, processruntime.ErrLogsNotFound, `"" is not a container name`},
		{"unknown pod", "no-such-uid", "c", processruntime.LogOptions{}, io.Discard, processruntime.ErrLogsNotFound, "no pod no-such-uid on this node"},
		{"path-ish pod", "../" + pod.UID, "c", processruntime.LogOptions{}, io.Discard, processruntime.ErrLogsNotFound, "cannot name a directory"},
		{"no previous instance", pod.UID, "c", processruntime.LogOptions{Previous: true}, io.Discard, processruntime.ErrLogsNotFound, "has no previous instance: it has not restarted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := rt.ReadLogs(context.Background(), tc.uid, tc.container, tc.opts, tc.w)
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.message)
		})
	}
}

func TestLogsOutliveThePodUntilPruned(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	pod := newPod(v1.RestartPolicyNever, "c", "echo kept")
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	ev.wait(t, "exit", exitedEvent(pod.UID, "c", 1))
	terminate(t, rt, pod, 1)
	assert.Equal(t, "kept\n", readLogs(t, rt, pod.UID, "c", processruntime.LogOptions{}), "the tombstone keeps the log")
	assert.Empty(t, logShims(t, rt.PodDir(pod.UID)), "no log shim outlives the pod")

	_, err = rt.PruneTombstones(func(types.UID) bool { return false })
	require.NoError(t, err)
	err = rt.ReadLogs(context.Background(), pod.UID, "c", processruntime.LogOptions{}, io.Discard)
	require.ErrorIs(t, err, processruntime.ErrLogsNotFound, "pruned with the tombstone")
}
