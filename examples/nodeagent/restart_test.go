package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// restartManifests are a static job and a static long-running pod.
const (
	onceManifest = `apiVersion: v1
kind: Pod
metadata: {name: once}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: example.com/once, command: [sh, -c, "echo once ran"]}
`
	serveManifest = `apiVersion: v1
kind: Pod
metadata: {name: serve}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: example.com/serve
    command: [sh, -c, "trap 'exit 0' TERM; echo serving; while :; do sleep 1; done"]
`
)

// running reports whether the runtime has a process of uid.
func (a *agent) running(uid types.UID) bool {
	st, _ := a.rt.PodStatus(context.Background(), uid, time.Time{})
	return st.Running()
}

func TestARestartedAgentDoesNotRunAFinishedStaticJobAgain(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	writeManifest(t, opts.manifests, "once", onceManifest)
	writeManifest(t, opts.manifests, "serve", serveManifest)

	// The first run: the job runs and finishes, the server runs until the
	// node shuts down.
	first, out, stop, wait := startAgent(t, opts)
	var once, serve types.UID
	waitFor(t, first, "both pods", func() bool {
		first.records.mu.Lock()
		defer first.records.mu.Unlock()
		for uid, rec := range first.records.pods {
			switch rec.name {
			case "default/once-test-node":
				once = uid
			case "default/serve-test-node":
				serve = uid
			}
		}
		return once != "" && serve != ""
	})
	waitFor(t, first, "the job to be cleaned up", first.records.stageReached(once, podworker.StageFinished))
	waitFor(t, first, "the server to run", func() bool { return first.running(serve) })
	log, err := containerLog(first.rt, once, "main")
	require.NoError(t, err, "the job's log is readable after its cleanup, while config has it")
	assert.Equal(t, "once ran\n", log)
	stop()
	require.NoError(t, wait(), "output:\n%s", out.String())
	requireNoProcess(t, first.rt, once, serve)

	// The agent starts again on the same state directory, with the same
	// manifests: same UIDs.
	second, out, stop, wait := startAgent(t, opts)
	waitFor(t, second, "the job to be cleaned up again", second.records.stageReached(once, podworker.StageFinished))
	waitFor(t, second, "the server to run again", func() bool { return second.running(serve) })
	log, err = containerLog(second.rt, once, "main")
	require.NoError(t, err)
	assert.Equal(t, "once ran\n", log, "the job did not run again")
	st, err := second.rt.PodStatus(context.Background(), serve, time.Time{})
	require.NoError(t, err)
	c, _ := st.Container("main")
	assert.Equal(t, int32(1), c.RestartCount, "the server (restartPolicy Always) was restarted")

	// The job leaves config: housekeeping removes its logs.
	require.NoError(t, os.Remove(filepath.Join(opts.manifests, "once.yaml")))
	waitFor(t, second, "the job to leave config", func() bool { return !second.inStore(once) })
	require.NoError(t, second.lc.SyncLoop().Housekeeping(context.Background()))
	assert.NoDirExists(t, second.rt.PodDir(once), "the job's tombstone is gone with the job")
	require.DirExists(t, second.rt.PodDir(serve))

	stop()
	require.NoError(t, wait(), "output:\n%s", out.String())
	requireNoProcess(t, second.rt, once, serve)
	// Container events are printed as they are drained, at the latest at
	// shutdown: the output is complete now.
	text := out.String()
	assert.NotRegexp(t, regexp.MustCompile(`default/once-test-node +· container main started`), text, "the job did not run again")
	assert.Regexp(t, regexp.MustCompile(`default/once-test-node +syncing → terminating +finished on its own`), text)
	assert.Regexp(t, regexp.MustCompile(`default/serve-test-node +· container main started, pid \d+ \(restart 1\)`), text)
	var left []types.UID
	for _, rp := range second.rt.Tombstones() {
		left = append(left, rp.UID)
	}
	assert.Equal(t, []types.UID{serve}, left, "only the server, still in config, leaves its logs behind")
}
