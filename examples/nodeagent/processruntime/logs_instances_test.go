package processruntime_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/examples/nodeagent/processruntime/internal/logshim"
)

func TestPreviousReadsTheInstanceBeforTheLatestRestart(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, BackOff: time.Millisecond, MaxBackOff: time.Millisecond})
	// Each run counts itself in the scratch directory; the third succeeds.
	pod := newPod(v1.RestartPolicyOnFailure, "c", `n=$(( $(cat count 2>/dev/null || echo 0) + 1 )); echo $n > count; echo "run $n"; [ $n -ge 3 ]`)
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	run := func(n int) {
		t.Helper()
		for {
			_, err := syncPod(rt, pod)
			if err == nil {
				break
			}
			require.ErrorIs(t, err, processruntime.ErrBackOff)
		}
		ev.wait(t, "exit", exitedEvent(pod.UID, "c", n))
	}
	read := func(opts processruntime.LogOptions) string { return readLogs(t, rt, pod.UID, "c", opts) }

	run(1)
	assert.Equal(t, "run 1\n", read(processruntime.LogOptions{}))
	run(2)
	assert.Equal(t, "run 2\n", read(processruntime.LogOptions{}), "the current instance only")
	assert.Equal(t, "run 1\n", read(processruntime.LogOptions{Previous: true}))
	assert.Equal(t, "run 1\n", read(processruntime.LogOptions{Previous: true, Follow: true}), "following an instance that ended returns")
	run(3)
	assert.Equal(t, "run 3\n", read(processruntime.LogOptions{}))
	assert.Equal(t, "run 2\n", read(processruntime.LogOptions{Previous: true}))
	chunks, err := logshim.Chunks(rt.LogDir(pod.UID, "c"))
	require.NoError(t, err)
	for _, c := range chunks {
		assert.GreaterOrEqual(t, c.Instance, 1, "instances before the previous one are deleted: %s", c.Name())
	}
}

func TestLongLinesAreSplitAndJoinedAgain(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add})
	a, b := strings.Repeat("a", 40000), strings.Repeat("b", 10000)
	pod := newPod(v1.RestartPolicyNever, "c", "printf '%s\\n%s' "+a+" "+b)
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	ev.wait(t, "exit", exitedEvent(pod.UID, "c", 1))
	t.Cleanup(func() { terminate(t, rt, pod, 1) })
	read := func(opts processruntime.LogOptions) string { return readLogs(t, rt, pod.UID, "c", opts) }

	require.Equal(t, a+"\n"+b, read(processruntime.LogOptions{}), "the lines as written")
	assert.Equal(t, b, read(processruntime.LogOptions{TailLines: ptr[int64](1)}), "a line split in records counts once")
	assert.Equal(t, a+"\n"+b, read(processruntime.LogOptions{TailLines: ptr[int64](2)}))
	_, texts := timedLines(t, read(processruntime.LogOptions{Timestamps: true}))
	assert.Equal(t, []string{a + "\n", b}, texts, "one timestamp per line, not per record")

	// On disk: records of at most 16 KiB of text.
	records := 0
	for _, f := range logFiles(t, rt.LogDir(pod.UID, "c")) {
		assert.LessOrEqual(t, f.size, int64(processruntime.DefaultContainerLogMaxSize))
		data := readFile(t, rt.LogDir(pod.UID, "c"), f.name)
		for line := range strings.Lines(data) {
			rec, err := logshim.ParseRecord([]byte(strings.TrimSuffix(line, "\n")))
			require.NoError(t, err)
			assert.LessOrEqual(t, len(rec.Text), logshim.MaxLine)
			records++
		}
	}
	assert.Equal(t, 3+1, records, "40000 bytes in three records, 10000 in one")
}

func TestFollowWaitsOnTheRuntimesClock(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(time.Now())
	rt := openRuntime(t, processruntime.Options{Clock: clk})
	pod := newPod(v1.RestartPolicyNever, "c", "echo first; "+waitFor("go")+"; echo second; "+waitFor("end"))
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	t.Cleanup(func() {
		// A SIGTERM needs no clock; SIGKILL after the grace period would.
		for _, p := range processes(t, pod.UID) {
			_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
		}
	})
	waitLog(t, rt, pod.UID, "c", "first\n")

	w := &notifyingWriter{wrote: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() {
		done <- rt.ReadLogs(context.Background(), pod.UID, "c", processruntime.LogOptions{Follow: true}, w)
	}()
	eventually(t, 10*time.Second, "the follower waits on the clock, having written the first line", func() bool {
		return w.String() == "first\n" && clk.HasWaiters()
	})
	touch(t, rt, pod.UID, "go")
	waitLog(t, rt, pod.UID, "c", "second\n")
	// The line is in the log, but the follower looks again only when the
	// clock ticks: it does not spin.
	require.Equal(t, "first\n", w.String())
	clk.Step(50 * time.Millisecond)
	eventually(t, 10*time.Second, "the follower wrote the second line after the tick", func() bool { return w.String() == "first\nsecond\n" })

	touch(t, rt, pod.UID, "end")
	eventually(t, 10*time.Second, "the container ended", func() bool { return !status(t, rt, pod.UID).Running() })
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			assert.Equal(t, "first\nsecond\n", w.String())
			return
		case <-time.After(10 * time.Millisecond):
			clk.Step(50 * time.Millisecond)
		}
	}
}

func TestALogShimHeldOpenOutsideThePodIsStoppedWithIt(t *testing.T) {
	t.Parallel()
	ev := newEvents()
	rt := openRuntime(t, processruntime.Options{OnEvent: ev.add, KillTimeout: 300 * time.Millisecond})
	// The escaped child keeps the container's stdout open.
	pod := newPod(v1.RestartPolicyNever, "c", "setsid sh -c 'touch escaped; exec sleep 300' & "+waitFor("escaped")+"; echo bye")
	t.Cleanup(func() {
		for _, p := range processes(t, pod.UID) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	_, err := syncPod(rt, pod)
	require.NoError(t, err)
	ev.wait(t, "exit", exitedEvent(pod.UID, "c", 1))
	assert.Equal(t, "bye\n", readLogs(t, rt, pod.UID, "c", processruntime.LogOptions{}))
	terminate(t, rt, pod, 1)
	assert.Empty(t, logShims(t, rt.PodDir(pod.UID)), "the pod's log shim stopped with it")
	assert.Equal(t, "bye\n", readLogs(t, rt, pod.UID, "c", processruntime.LogOptions{Follow: true}), "its log is complete")
}
