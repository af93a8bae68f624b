package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/kube/agent"
)

// burst is a set of pods whose containers end with known exit codes: the
// even ones exit as soon as they start (so their end can come before the
// Node authorizer has seen their binding), the odd ones wait for a gate
// and then all exit at once.
type burst struct {
	gate string
	pods []*v1.Pod
	// codes[i] is the exit code of pods[i].
	codes []int32
}

// newBurst creates n pods named prefix-<i> on node through create.
func newBurst(t *testing.T, n int, node, prefix string, create func(*v1.Pod) *v1.Pod) *burst {
	t.Helper()
	b := &burst{gate: t.TempDir()}
	for i := range n {
		code := int32(i % 4)
		script := fmt.Sprintf("exit %d", code)
		if i%2 == 1 {
			script = fmt.Sprintf("while [ ! -e $D/go ]; do sleep 0.05; done; exit %d", code)
		}
		b.pods = append(b.pods, create(apiPod(fmt.Sprintf("%s-%d", prefix, i), node, shell(b.gate, script)...)))
		b.codes = append(b.codes, code)
	}
	return b
}

// waitGatedRunning waits until the gated pods run in the API server.
func (b *burst) waitGatedRunning(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	for i, p := range b.pods {
		if i%2 == 1 {
			waitForPod(t, cs, p.Namespace, p.Name, "Running", isPhase(v1.PodRunning))
		}
	}
}

// release lets the gated containers exit, all at once.
func (b *burst) release(t *testing.T) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(b.gate, "go"), nil, 0o600))
}

// waitStopped waits until no process of the burst's pods runs.
func (b *burst) waitStopped(t *testing.T) {
	t.Helper()
	err := wait.PollUntilContextTimeout(testContext(t), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		for _, p := range b.pods {
			if len(processesOf(t, p.UID)) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "the burst's processes did not all end")
}

// checkFinal waits until each pod has its terminal phase and its exit code
// in the API server: Succeeded for 0, Failed otherwise.
func (b *burst) checkFinal(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	for i, p := range b.pods {
		want := v1.PodSucceeded
		if b.codes[i] != 0 {
			want = v1.PodFailed
		}
		got := waitForPod(t, cs, p.Namespace, p.Name, string(want), func(p *v1.Pod) bool {
			return p != nil && (p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed)
		})
		assert.Equal(t, want, got.Status.Phase, "pod %s", p.Name)
		if assert.Len(t, got.Status.ContainerStatuses, 1, "pod %s", p.Name) {
			term := got.Status.ContainerStatuses[0].State.Terminated
			if assert.NotNil(t, term, "pod %s: the container is terminated", p.Name) {
				assert.Equal(t, b.codes[i], term.ExitCode, "pod %s: exit code", p.Name)
			}
		}
	}
}

// testFinalStatusBurst: many pods created straight onto the node, whose
// containers exit at once or at their start, each end with their terminal
// phase and exit code in the API server.
func testFinalStatusBurst(t *testing.T, c *cluster) {
	const node = "burst-node"
	startAgent(t, c, node, t.TempDir(), "")
	start := time.Now()
	b := newBurst(t, 24, node, "burst", func(p *v1.Pod) *v1.Pod { return createPod(t, c, p) })
	b.waitGatedRunning(t, c.admin)
	b.release(t)
	b.checkFinal(t, c.admin)
	t.Logf("24 pods created and ended, every final status in the API server, in %v", time.Since(start).Round(time.Millisecond))
}

// TestAPIServerRestart: the API server is stopped while an agent's pods
// run, their containers all exit while it is away, and it is started again
// on the same etcd: every pod ends with its terminal phase and exit code
// in the API server.
func TestAPIServerRestart(t *testing.T) {
	const node = "apirestart-node"
	s := startRestartableServer(t, node)
	runAgent(t, agent.Config{
		Client:            s.nodeClient(t, node),
		NodeName:          node,
		StateDir:          t.TempDir(),
		HeartbeatInterval: time.Second,
	})
	b := newBurst(t, 16, node, "restart", func(p *v1.Pod) *v1.Pod {
		created, err := s.admin.CoreV1().Pods(p.Namespace).Create(testContext(t), p, metav1.CreateOptions{})
		require.NoError(t, err)
		killAtEnd(t, created.UID)
		return created
	})
	b.waitGatedRunning(t, s.admin)

	s.stop()
	stopped := time.Now()
	b.release(t)
	b.waitStopped(t)
	s.start(t)
	b.checkFinal(t, s.admin)
	t.Logf("every final status in the API server %v after it was stopped", time.Since(stopped).Round(time.Millisecond))
}
