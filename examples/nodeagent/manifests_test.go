package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle/podconfig"
)

// sleeperManifest is a static pod that runs until it is stopped.
func sleeperManifest(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: example.com/sleeper, command: [sleep, "300"]}
`, name)
}

// runningStatic returns the UID of the running static pod named name, if
// any.
func (a *agent) runningStatic(name string) (types.UID, bool) {
	for _, info := range a.workers.Pods() {
		if strings.HasPrefix(info.FullName, name+"-test-node_") && a.running(info.UID) {
			return info.UID, true
		}
	}
	return "", false
}

// A manifest directory holding files that would block or exhaust a naive
// reader (a named pipe, a symlink to one, a 6 GiB file) neither keeps the
// agent from starting the manifests beside them, nor one added later, nor
// from shutting down: each bad file is reported once and skipped.
func TestHostileManifestsDoNotStopTheNode(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	aux := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(opts.manifests, "pipe.yaml"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(aux, "fifo"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(aux, "fifo"), filepath.Join(opts.manifests, "fifo-link.yaml")))
	huge, err := os.Create(filepath.Join(opts.manifests, "huge.yaml"))
	require.NoError(t, err)
	require.NoError(t, huge.Truncate(6<<30), "a sparse file: it costs no disk")
	require.NoError(t, huge.Close())
	writeManifest(t, opts.manifests, "early", sleeperManifest("early"))

	a, out, stop, wait := startAgent(t, opts)
	waitFor(t, a, "the manifest beside the bad files to run", func() bool {
		_, ok := a.runningStatic("early")
		return ok
	})
	reported := func(file, why string) bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, "event Warning "+podconfig.ReasonInvalidManifest) && strings.Contains(line, file+" is ignored") && strings.Contains(line, why) {
				return true
			}
		}
		return false
	}
	eventually(t, 20*time.Second, "each bad file to be reported", func() bool {
		return reported("pipe.yaml", "a named pipe") && reported("fifo-link.yaml", "a named pipe") && reported("huge.yaml", "cap")
	})

	writeManifest(t, opts.manifests, "late", sleeperManifest("late"))
	waitFor(t, a, "the manifest added later to run", func() bool {
		_, ok := a.runningStatic("late")
		return ok
	})
	early, _ := a.runningStatic("early")
	late, _ := a.runningStatic("late")

	stop()
	require.NoError(t, wait(), "output:\n%s", out.String())
	requireNoProcess(t, a.rt, early, late)
	for _, file := range []string{"pipe.yaml", "fifo-link.yaml", "huge.yaml"} {
		assert.Equal(t, 1, strings.Count(out.String(), file+" is ignored"), "%s is reported once, not at every scan", file)
	}
}
