package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// criManifest is a static pod whose container runs until stopped.
func criManifest(name string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: default}
spec:
  restartPolicy: Always
  containers:
  - {name: main, image: example.com/app, command: [sleep, "1000"]}
`
}

// readySandboxes returns the pod UIDs of the runtime's ready sandboxes.
func readySandboxes(t *testing.T, rt *fakeapi.FakeRuntimeService) map[types.UID]bool {
	t.Helper()
	sbs, err := rt.ListPodSandbox(context.Background(), nil)
	require.NoError(t, err)
	out := map[types.UID]bool{}
	for _, sb := range sbs {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			out[types.UID(sb.GetLabels()[cri.LabelPodUID])] = true
		}
	}
	return out
}

// The CRI agent keeps the kubelet's rule too: killed with running pods and
// started again over the same runtime (cri-api's fake, which keeps its
// sandboxes as a real runtime does), it kills nothing before its manifests
// have been read; then it kills the pod whose manifest is gone and adopts
// the other.
func TestARestartedCRIAgentKillsNothingBeforeItsSourcesAreReady(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.runtime, opts.manifests = runtimeCRI, t.TempDir()
	writeManifest(t, opts.manifests, "keep", criManifest("keep"))
	writeManifest(t, opts.manifests, "stray", criManifest("stray"))
	rt := fakeapi.NewFakeRuntimeService()
	images := fakeapi.NewFakeImageService()
	images.SetFakeImages([]string{"example.com/app"})

	first, err := newCRIAgent(opts, &syncBuffer{}, newLogger(&syncBuffer{}, 0), rt, images, "fake")
	require.NoError(t, err)
	runCtx, kill := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- first.lc.Run(runCtx) }()
	eventually(t, 20*time.Second, "both pods to run", func() bool { return len(readySandboxes(t, rt)) == 2 })
	uids := map[string]types.UID{}
	for _, info := range first.lc.Workers().Pods() {
		uids[info.Pod.Name] = info.UID
	}
	keep, stray := uids["keep-test-node"], uids["stray-test-node"]
	require.NotEmpty(t, keep)
	require.NotEmpty(t, stray)
	kill()
	require.NoError(t, <-ran)
	require.Len(t, readySandboxes(t, rt), 2, "killing the agent left its pods running")

	// The stray pod's manifest goes while the agent is down; the manifests
	// are slow to be read when it comes back.
	require.NoError(t, os.Remove(filepath.Join(opts.manifests, "stray.yaml")))
	release := make(chan struct{})
	opts.wrapSource = holdSource(mirror.FileSource, release)
	log := &syncBuffer{}
	second, err := newCRIAgent(opts, &syncBuffer{}, newLogger(log, 5), rt, images, "fake")
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	ran = make(chan error, 1)
	go func() { ran <- second.lc.Run(runCtx) }()
	defer func() {
		stop()
		require.NoError(t, <-ran)
	}()
	eventually(t, 20*time.Second, "three housekeeping passes skipped", func() bool { return skippedHousekeeping(log) >= 3 })
	assert.Equal(t, map[types.UID]bool{keep: true, stray: true}, readySandboxes(t, rt), "nothing is stopped before the manifests are read")
	_, known := second.lc.Workers().Pod(stray)
	assert.False(t, known, "no worker was made to kill the stray pod")

	close(release)
	eventually(t, 20*time.Second, "the stray pod to be removed", func() bool {
		pods, err := second.syncer.ListRuntimePods(context.Background())
		require.NoError(t, err)
		return len(pods) == 1 && pods[0].UID == keep
	})
	eventually(t, 20*time.Second, "the kept pod to be adopted", func() bool {
		info, ok := second.lc.Workers().Pod(keep)
		return ok && info.Stage == podworker.StageSyncing
	})
	assert.Equal(t, map[types.UID]bool{keep: true}, readySandboxes(t, rt), "the pod whose manifest stayed runs on")
}
