package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
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
	// timeout bounds each wait for the whole burst.
	timeout time.Duration
}

// newBurst creates n pods named prefix-<i> (restartPolicy Never, in the
// default namespace, not bound to a node) through create, which may change
// pod i before it creates it and returns it as created.
func newBurst(t *testing.T, n int, prefix string, timeout time.Duration, create func(i int, pod *v1.Pod) *v1.Pod) *burst {
	t.Helper()
	b := &burst{gate: t.TempDir(), timeout: timeout}
	for i := range n {
		code := int32(i % 4)
		script := fmt.Sprintf("exit %d", code)
		if i%2 == 1 {
			script = fmt.Sprintf("while [ ! -e $D/go ]; do sleep 0.05; done; exit %d", code)
		}
		b.pods = append(b.pods, create(i, apiPod(fmt.Sprintf("%s-%d", prefix, i), "", shell(b.gate, script)...)))
		b.codes = append(b.codes, code)
	}
	return b
}

// waitAll polls the burst's pods through cs until cond holds for each
// (nil when it does not exist), and returns them as last read.
func (b *burst) waitAll(t *testing.T, cs kubernetes.Interface, what string, cond func(i int, p *v1.Pod) bool) []*v1.Pod {
	t.Helper()
	last := make([]*v1.Pod, len(b.pods))
	var pending []string
	err := wait.PollUntilContextTimeout(testContextFor(t, b.timeout), 50*time.Millisecond, b.timeout, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		for i, p := range b.pods {
			if last[i] != nil && cond(i, last[i]) {
				continue
			}
			got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				got = nil
			case err != nil:
				return false, nil // retried until the deadline
			}
			last[i] = got
			if !cond(i, got) {
				pending = append(pending, fmt.Sprintf("%s: %s", p.Name, describe(got)))
			}
		}
		return len(pending) == 0, nil
	})
	require.NoError(t, err, "waiting for the burst's pods: %s; not yet:\n%s", what, strings.Join(pending, "\n"))
	return last
}

// waitGatedRunning waits until the gated pods run in the API server.
func (b *burst) waitGatedRunning(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	b.waitAll(t, cs, "the gated ones Running", func(i int, p *v1.Pod) bool {
		return i%2 == 0 || isPhase(v1.PodRunning)(p)
	})
}

// release lets the gated containers exit, all at once.
func (b *burst) release(t *testing.T) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(b.gate, "go"), nil, 0o600))
}

// waitStopped waits until no process of the burst's pods runs.
func (b *burst) waitStopped(t *testing.T) {
	t.Helper()
	err := wait.PollUntilContextTimeout(testContextFor(t, b.timeout), 20*time.Millisecond, b.timeout, true, func(context.Context) (bool, error) {
		for _, p := range b.pods {
			if len(processesOf(t, p.UID)) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "the burst's processes did not all end")
}

// checkFinal waits until each pod has a terminal phase in the API server,
// checks it is the one its exit code calls for (Succeeded for 0, Failed
// otherwise) and that its container's exit code is stored, and returns the
// pods as last read.
func (b *burst) checkFinal(t *testing.T, cs kubernetes.Interface) []*v1.Pod {
	t.Helper()
	final := b.waitAll(t, cs, "a terminal phase", func(_ int, p *v1.Pod) bool {
		return p != nil && (p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed)
	})
	for i, got := range final {
		want := v1.PodSucceeded
		if b.codes[i] != 0 {
			want = v1.PodFailed
		}
		assert.Equal(t, b.pods[i].UID, got.UID, "pod %s is the one created", got.Name)
		assert.Equal(t, want, got.Status.Phase, "pod %s", got.Name)
		if assert.Len(t, got.Status.ContainerStatuses, 1, "pod %s", got.Name) {
			term := got.Status.ContainerStatuses[0].State.Terminated
			if assert.NotNil(t, term, "pod %s: the container is terminated", got.Name) {
				assert.Equal(t, b.codes[i], term.ExitCode, "pod %s: exit code", got.Name)
			}
		}
	}
	return final
}

// testFinalStatusBurst: many pods created straight onto the node, whose
// containers exit at once or at their start, each end with their terminal
// phase and exit code in the API server.
func testFinalStatusBurst(t *testing.T, c *cluster) {
	const node = "burst-node"
	hostFilesAgent(t, c, node, t.TempDir(), "")
	start := time.Now()
	b := newBurst(t, 24, "burst", waitTimeout, func(_ int, p *v1.Pod) *v1.Pod {
		p.Spec.NodeName = node
		return createPod(t, c, p)
	})
	b.waitGatedRunning(t, c.admin)
	b.release(t)
	b.checkFinal(t, c.admin)
	t.Logf("24 pods created and ended, every final status in the API server, in %v", time.Since(start).Round(time.Millisecond))
}

// TestAPIServerRestart: the API server is stopped while an agent's pods
// run, their containers all exit while it is away, and it is started again
// on the same etcd: every pod ends with its terminal phase and exit code
// in the API server. Half the pods are created on the node; the others
// are created unbound and then bound through the pods/binding subresource,
// as a scheduler binds them, so the node (and its Node authorizer) learns
// of them by an update.
func TestAPIServerRestart(t *testing.T) {
	const node = "apirestart-node"
	s := startRestartableServer(t, node)
	runAgent(t, agent.Config{
		Client:            s.nodeClient(t, node),
		NodeName:          node,
		StateDir:          t.TempDir(),
		HeartbeatInterval: time.Second,
		Sandbox:           processruntime.SandboxOff, // the burst's gate is a host directory
		// No periodic status checks: each final status must land through
		// the writer's retries of the write the API server's absence
		// refused, not through a check a minute later.
		StatusResyncInterval: -1,
	})
	// Pods 4..7 and 12..15 are bound later: every exit code, some exiting
	// at their start, some gated.
	bindLater := func(i int) bool { return (i/4)%2 == 1 }
	b := newBurst(t, 16, "restart", waitTimeout, func(i int, p *v1.Pod) *v1.Pod {
		ctx := testContext(t)
		if !bindLater(i) {
			p.Spec.NodeName = node
		}
		created, err := s.admin.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		killAtEnd(t, created.UID)
		if bindLater(i) {
			require.Empty(t, created.Spec.NodeName)
			err := s.admin.CoreV1().Pods(p.Namespace).Bind(ctx, &v1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: created.Name, UID: created.UID},
				Target:     v1.ObjectReference{Kind: "Node", Name: node},
			}, metav1.CreateOptions{})
			require.NoError(t, err, "binding %s", created.Name)
		}
		return created
	})
	b.waitGatedRunning(t, s.admin)

	s.stop()
	stopped := time.Now()
	b.release(t)
	b.waitStopped(t)
	s.start(t)
	for i, p := range b.checkFinal(t, s.admin) {
		assert.Equal(t, node, p.Spec.NodeName, "pod %s (bound later: %v)", p.Name, bindLater(i))
	}
	t.Logf("every final status in the API server %v after it was stopped", time.Since(stopped).Round(time.Millisecond))
}
