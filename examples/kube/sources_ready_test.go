package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// logLines keeps an agent's log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *logLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// testAgentRestartWaitsForItsSources: the kubelet's rule, through the
// assembly. An agent killed with running pods (their processes outlive it)
// and started again takes nothing for an orphan before every source has
// delivered its pods. Here the API server lost one of its pods while the
// agent was down (a force delete), and the manifest directory cannot be
// read when it comes back: the lost pod's processes run on until the
// directory is back, then it is killed as an orphan and the static pod is
// adopted, not restarted.
func testAgentRestartWaitsForItsSources(t *testing.T, c *cluster) {
	const node = "sources-node"
	stateDir, lostDir, staticDir := t.TempDir(), t.TempDir(), t.TempDir()
	manifests := filepath.Join(t.TempDir(), "manifests")
	require.NoError(t, os.Mkdir(manifests, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte(`apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
  - name: main
    image: none
    command: ["/bin/sh", "-c", "echo $$ >> `+staticDir+`/runs; while true; do sleep 0.05; done"]
`), 0o600))

	first := hostFilesAgent(t, c, node, stateDir, manifests)
	lost := createPod(t, c, apiPod("lost", node, shell(lostDir, `while true; do sleep 0.05; done`)...))
	waitForPod(t, c.admin, "default", lost.Name, "Running", isPhase(v1.PodRunning))
	mirrorPod := waitForPod(t, c.admin, "default", "web-"+node, "a Running mirror pod", isPhase(v1.PodRunning))
	static := types.UID(mirrorPod.Annotations[mirror.ConfigMirrorAnnotationKey])
	killAtEnd(t, static)
	lostProcs, staticProcs := mainProcesses(t, lost.UID), mainProcesses(t, static)
	require.NotEmpty(t, lostProcs)
	require.NotEmpty(t, staticProcs)
	first.Stop(t)

	// While the agent is down the API server loses a pod, and the
	// manifests become unreadable (a file stands where the directory was:
	// listing it fails, and a source that could not list has not spoken; a
	// missing directory would be read as one without pods, as the kubelet
	// reads it).
	require.NoError(t, c.admin.CoreV1().Pods("default").Delete(testContext(t), lost.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}))
	require.NoError(t, os.Rename(manifests, manifests+".away"))
	require.NoError(t, os.WriteFile(manifests, nil, 0o600))

	logs := &logLines{}
	second := runAgent(t, agent.Config{
		Client:      c.nodeClient(t, node),
		NodeName:    node,
		StateDir:    stateDir,
		ManifestDir: manifests,
		Logger:      funcr.New(logs.add, funcr.Options{Verbosity: 4}),
		Sandbox:     processruntime.SandboxOff,
	})
	err := wait.PollUntilContextTimeout(testContext(t), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return logs.count("Skipping housekeeping: the config sources are not all ready") >= 3, nil
	})
	require.NoError(t, err, "waiting for three housekeeping passes skipped")
	assert.Equal(t, lostProcs, mainProcesses(t, lost.UID), "a pod the API server lost is not killed while the manifests have not been read")
	assert.Equal(t, staticProcs, mainProcesses(t, static), "nor is the static pod")
	_, known := second.workers(t).Pod(lost.UID)
	assert.False(t, known, "no worker was made to kill it")

	require.NoError(t, os.Remove(manifests))
	require.NoError(t, os.Rename(manifests+".away", manifests))
	err = wait.PollUntilContextTimeout(testContext(t), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return len(processesOf(t, lost.UID)) == 0, nil
	})
	require.NoError(t, err, "waiting for the lost pod to be killed as an orphan")
	second.waitWorker(t, static, "synced", func(info podworker.PodInfo, ok bool) bool { return ok && info.Started && !info.Working })
	assert.Equal(t, staticProcs, mainProcesses(t, static), "the static pod was adopted, not restarted")
	assert.Len(t, lines(t, filepath.Join(staticDir, "runs")), 1)
}
