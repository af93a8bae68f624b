package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podkit/podkit/examples/kube/agent"
	"github.com/podkit/podkit/examples/nodeagent/processruntime"
)

// want is a pod condition a test expects: its status, reason and message.
type want struct {
	status          v1.ConditionStatus
	reason, message string
}

// observesItsGeneration reports whether p's status and each condition the
// agent sets observe p's generation, as the kubelet's do since
// PodObservedGenerationTracking (GA in 1.37). A condition the agent does
// not own (a readiness gate's) is left out.
func observesItsGeneration(t *testing.T, p *v1.Pod, gates ...v1.PodConditionType) {
	t.Helper()
	require.Positive(t, p.Generation)
	assert.Equal(t, p.Generation, p.Status.ObservedGeneration, "status.observedGeneration")
	for _, c := range p.Status.Conditions {
		if !slices.Contains(gates, c.Type) {
			assert.Equal(t, p.Generation, c.ObservedGeneration, "observedGeneration of condition %s", c.Type)
		}
	}
}

// conditionsAre reports whether p has each of the conditions in ws.
func conditionsAre(ws map[v1.PodConditionType]want) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool {
		if p == nil {
			return false
		}
		for typ, w := range ws {
			c := condition(p, typ)
			if c == nil || c.Status != w.status || c.Reason != w.reason || c.Message != w.message {
				return false
			}
		}
		return true
	}
}

// testAgentConditions: a pod carries the kubelet's conditions, with the
// kubelet's reasons and messages and the pod's generation observed,
// through init containers (ready once completed), a readiness gate and
// completion; a resync does not move their transition times.
func testAgentConditions(t *testing.T, c *cluster) {
	const node = "cond-node"
	const gate = v1.PodConditionType("example.com/ready")
	dir := t.TempDir()
	// The node runs this one pod: every SyncPod it reports is the pod's.
	var syncs atomic.Int64
	trace := func(tr agent.PodTrace) {
		if tr.Stage == agent.TraceSyncEnded {
			syncs.Add(1)
		}
	}
	runAgent(t, agent.Config{Client: c.nodeClient(t, node), NodeName: node, StateDir: t.TempDir(), ResyncInterval: 200 * time.Millisecond, Sandbox: processruntime.SandboxOff, Trace: trace})

	pod := apiPod("gated", node, shell(dir, `while [ ! -e $D/main-go ]; do sleep 0.05; done; exit 0`)...)
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "none", Command: shell(dir, `while [ ! -e $D/init-go ]; do sleep 0.05; done`)}}
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate}}
	pod = createPod(t, c, pod)

	initializing := map[v1.PodConditionType]want{
		v1.PodReadyToStartContainers: {v1.ConditionTrue, "", ""},
		v1.PodInitialized:            {v1.ConditionFalse, "ContainersNotInitialized", "containers with incomplete status: [init]"},
		v1.ContainersReady:           {v1.ConditionFalse, "ContainersNotReady", "containers with unready status: [main]"},
		v1.PodReady:                  {v1.ConditionFalse, "ContainersNotReady", "containers with unready status: [main]"},
		v1.PodScheduled:              {v1.ConditionTrue, "", ""},
	}
	during := waitForPod(t, c.admin, "default", pod.Name, "initializing", conditionsAre(initializing))
	observesItsGeneration(t, during)
	require.Len(t, during.Status.InitContainerStatuses, 1)
	assert.False(t, during.Status.InitContainerStatuses[0].Ready, "a running init container is not ready")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "init-go"), nil, 0o600))
	gated := map[v1.PodConditionType]want{
		v1.PodReadyToStartContainers: {v1.ConditionTrue, "", ""},
		v1.PodInitialized:            {v1.ConditionTrue, "", ""},
		v1.ContainersReady:           {v1.ConditionTrue, "", ""},
		v1.PodReady: {v1.ConditionFalse, "ReadinessGatesNotReady",
			fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gate)},
	}
	initialized := waitForPod(t, c.admin, "default", pod.Name, "waiting for its readiness gate", conditionsAre(gated))
	require.Len(t, initialized.Status.InitContainerStatuses, 1)
	assert.True(t, initialized.Status.InitContainerStatuses[0].Ready, "a completed init container is ready")

	// Whoever owns the gate sets it: the pod becomes Ready.
	_, err := c.admin.CoreV1().Pods("default").Patch(testContext(t), pod.Name, types.StrategicMergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"example.com/ready","status":"True"}]}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	ready := waitForPod(t, c.admin, "default", pod.Name, "Ready", conditionsAre(map[v1.PodConditionType]want{
		v1.PodReady: {v1.ConditionTrue, "", ""},
		gate:        {v1.ConditionTrue, "", ""},
	}))

	// Resyncs go on (each derives the pod's status again; the status
	// writer writes it when it differs from what it wrote) for more than a
	// second, the API server's time resolution: nothing moves.
	captured := time.Now()
	poll := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) { return cond(), nil })
		require.NoError(t, err, what)
	}
	poll("two seconds", func() bool { return time.Since(captured) >= 2*time.Second })
	base := syncs.Load()
	poll("three more resyncs", func() bool { return syncs.Load() >= base+3 })
	after, err := c.admin.CoreV1().Pods("default").Get(testContext(t), pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, ready.Status.Conditions, after.Status.Conditions, "a resync left the conditions and their transition times as they were")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "main-go"), nil, 0o600))
	done := waitForPod(t, c.admin, "default", pod.Name, "Succeeded, with the conditions of a completed pod", func(p *v1.Pod) bool {
		return isPhase(v1.PodSucceeded)(p) && conditionsAre(map[v1.PodConditionType]want{
			v1.PodReadyToStartContainers: {v1.ConditionFalse, "PodSandboxNotReady", "pod sandbox is not ready"},
			v1.PodInitialized:            {v1.ConditionTrue, "PodCompleted", ""},
			v1.ContainersReady:           {v1.ConditionFalse, "PodCompleted", ""},
			v1.PodReady:                  {v1.ConditionFalse, "PodCompleted", ""},
			gate:                         {v1.ConditionTrue, "", ""},
		})(p)
	})
	observesItsGeneration(t, done, gate)
}
