package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

var stamp = regexp.MustCompile(`(?m)^ *(\d+\.\d+)s  `)

// requireStampsInOrder checks that the stamps of the agent's output lines
// never go back.
func requireStampsInOrder(t *testing.T, out string) {
	t.Helper()
	prev := -1.0
	for _, m := range stamp.FindAllStringSubmatch(out, -1) {
		s, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, s, prev, "a line is stamped before the line printed above it:\n%s", out)
		prev = s
	}
}

func TestConsoleStampsNeverGoBack(t *testing.T) {
	t.Parallel()
	out := &syncBuffer{}
	c := newConsole(out)
	c.lineAt(c.start.Add(2*time.Second), "default/a", "happened second, printed first")
	c.lineAt(c.start.Add(time.Second), "default/a", "happened first, printed second")
	c.lineAt(c.start.Add(3*time.Second), "", "in order again")
	assert.Equal(t, "  2.000s  default/a                       happened second, printed first\n"+
		"  2.000s  default/a                       happened first, printed second\n"+
		"  3.000s  in order again\n", out.String())
	requireStampsInOrder(t, out.String())
}

// A UID that comes back (a static pod whose manifest was removed and put
// back) is reported for its new life: its termination time is not counted
// from the first life's.
func TestAUIDThatComesBackIsReportedForItsNewLife(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	out := &syncBuffer{}
	a, err := newAgent(opts, out, logr.Discard())
	require.NoError(t, err)
	t.Cleanup(func() { a.rt.Close() })

	uid := types.UID("returning-uid")
	t0 := a.start
	life := func(start time.Time) {
		for _, step := range []struct {
			from, to podworker.Stage
			at       time.Duration
		}{
			{podworker.StageAbsent, podworker.StageNotStarted, 0},
			{podworker.StageNotStarted, podworker.StageSyncing, 0},
			{podworker.StageSyncing, podworker.StageTerminationRequested, time.Second},
			{podworker.StageTerminationRequested, podworker.StageTerminating, time.Second},
			{podworker.StageTerminating, podworker.StageTerminated, time.Second + 20*time.Millisecond},
			{podworker.StageTerminated, podworker.StageFinished, time.Second + 30*time.Millisecond},
		} {
			a.timeline.onTransition(podworker.Transition{UID: uid, FullName: "returning_default", From: step.from, To: step.to, Time: start.Add(step.at)})
		}
	}
	life(t0)
	a.timeline.onTransition(podworker.Transition{UID: uid, FullName: "returning_default", From: podworker.StageFinished, To: podworker.StageAbsent, Time: t0.Add(2 * time.Second)})
	life(t0.Add(60 * time.Second))

	assert.Regexp(t, `(?m)^ *61\.020s  default/returning +terminating → terminated +containers stopped, in 0\.02s$`, out.String())
	rows, _ := a.timeline.summary()
	require.Len(t, rows, 1)
	assert.Equal(t, "0.02s", rows[0].Termination)
	requireStampsInOrder(t, out.String())
}

// Pods that come and go leave nothing in the agent but the summary lines
// of the latest that departed.
func TestRecordsArePrunedUnderChurn(t *testing.T) {
	t.Parallel()
	const rounds, pods = 3, 60
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	a, out, stop, wait := startAgent(t, opts)
	for round := range rounds {
		for i := range pods {
			writeManifest(t, opts.manifests, fmt.Sprintf("churn-%d-%d", round, i), fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: churn-%d-%d}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: example.com/churn, command: ["true"]}
`, round, i))
		}
		waitFor(t, a, fmt.Sprintf("round %d: every pod to finish", round), func() bool {
			a.records.mu.Lock()
			defer a.records.mu.Unlock()
			done := 0
			for _, rec := range a.records.pods {
				if rec.maxStage >= podworker.StageFinished {
					done++
				}
			}
			return done == pods
		})
		names, err := filepath.Glob(filepath.Join(opts.manifests, "*.yaml"))
		require.NoError(t, err)
		for _, n := range names {
			require.NoError(t, os.Remove(n))
		}
		waitFor(t, a, fmt.Sprintf("round %d: every record to be pruned", round), func() bool {
			a.records.mu.Lock()
			defer a.records.mu.Unlock()
			return len(a.records.pods) == 0
		})
		assert.Empty(t, a.workers.Pods(), "the engine forgot them")
		assert.Empty(t, a.rt.RuntimePods())
		assert.Empty(t, a.rt.Tombstones(), "their logs went with them")
		assert.Empty(t, a.endpoint().podKeys(), "/pods is empty")
		assert.Empty(t, a.api.mirrorPodNames(), "their mirror pods were deleted")
	}
	a.records.mu.Lock()
	assert.Len(t, a.records.departed, maxDeparted, "the latest departed keep a summary line")
	assert.Equal(t, rounds*pods-maxDeparted, a.records.departedDropped)
	a.records.mu.Unlock()
	stop()
	require.NoError(t, wait(), "output:\n%s", out.String())
	assert.Contains(t, out.String(), fmt.Sprintf("(%d earlier pods that left the node are not shown)", rounds*pods-maxDeparted))
}
