package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// heldSource is a config source that delivers nothing until released: a
// source that is slow to speak after a restart.
type heldSource struct {
	src     podconfig.Source
	release chan struct{}
}

func (s heldSource) Source() string { return s.src.Source() }

func (s heldSource) Run(ctx context.Context, sink podconfig.PodSink) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil
	}
	return s.src.Run(ctx, sink)
}

// holdSource returns an options.wrapSource that holds the source named
// name until release is closed.
func holdSource(name string, release chan struct{}) func(podconfig.Source) podconfig.Source {
	return func(src podconfig.Source) podconfig.Source {
		if src.Source() != name {
			return src
		}
		return heldSource{src: src, release: release}
	}
}

// skippedHousekeeping counts the sync loop's "not all sources ready" lines
// in a log written at V(4).
func skippedHousekeeping(log *syncBuffer) int {
	return strings.Count(log.String(), "Skipping housekeeping: the config sources are not all ready")
}

// The kubelet's rule, through the assembly: an agent killed with running
// pods (its processes survive, as after a crash) and started again takes
// nothing for an orphan before every source has delivered its pods. The
// API server's pod of the first run is gone from the (new, empty) fake API
// server, so it must be killed, and the static pod must be adopted — but
// only once the manifests have been read too.
func TestARestartedAgentKillsNothingBeforeItsSourcesAreReady(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.manifests = t.TempDir()
	writeManifest(t, opts.manifests, "serve", serveManifest)

	// The first run, killed: its lifecycle stops without a node shutdown
	// and the runtime is closed, leaving the processes running.
	first, err := newAgent(opts, &syncBuffer{}, logr.Discard())
	require.NoError(t, err)
	runCtx, kill := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- first.lc.Run(runCtx) }()
	grace := int64(5)
	first.api.Create(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:                      opts.nodeName,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []v1.Container{{Name: "main", Image: "example.com/web", Command: []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"}}},
		},
	})
	web, serve := uidOfEventually(t, first, "default/web"), uidOfEventually(t, first, "default/serve-test-node")
	waitFor(t, first, "both pods to run", func() bool { return first.running(web) && first.running(serve) })
	kill()
	require.NoError(t, <-ran)
	first.rt.Close()

	// The second run: the manifests source is slow to speak.
	release := make(chan struct{})
	opts.wrapSource = holdSource(mirror.FileSource, release)
	log := &syncBuffer{}
	second, out, stop, wait := startAgentWithLog(t, opts, newLogger(log, 5))
	waitFor(t, second, "three housekeeping passes skipped", func() bool { return skippedHousekeeping(log) >= 3 })
	assert.True(t, second.running(web), "the API server no longer has web, but the manifests have not spoken: it is not killed yet")
	assert.True(t, second.running(serve), "the static pod runs on")
	_, known := second.workers.Pod(web)
	assert.False(t, known, "no worker was made to kill it")
	assert.False(t, second.lc.SyncLoop().SourcesReady())

	close(release)
	waitFor(t, second, "the orphan to be killed", func() bool { return !second.running(web) })
	waitFor(t, second, "the static pod to be adopted", second.records.stageReached(serve, podworker.StageSyncing))
	assert.True(t, second.running(serve), "the desired pod was adopted, not killed")
	st, err := second.rt.PodStatus(context.Background(), serve, time.Time{})
	require.NoError(t, err)
	c, _ := st.Container("main")
	assert.Equal(t, int32(0), c.RestartCount, "adopted, not restarted")

	stop()
	require.NoError(t, wait(), "output:\n%s", out.String())
	requireNoProcess(t, second.rt, web, serve)
}
