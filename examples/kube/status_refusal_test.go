package kube_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/statuswriter"
	"github.com/podkit/podkit/podworker"
)

// refusingPods refuses the reads of the pod named name, as the Node
// authorizer does before it has seen the pod's binding, while refusals
// are left.
type refusingPods struct {
	corev1client.PodInterface
	name     string
	refusals *atomic.Int64
}

func (p refusingPods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error) {
	if name == p.name && p.refusals.Add(-1) >= 0 {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, name, nil)
	}
	return p.PodInterface.Get(ctx, name, opts)
}

// testStatusWriterRefusals: a read the API server refuses is tried again
// while the pod exists, however many times, and not once it is gone.
func testStatusWriterRefusals(t *testing.T, c *cluster) {
	const node = "refusal-node"
	ctx := testContext(t)
	c.registerNode(t, node)
	real := c.nodeClient(t, node)
	var refusals atomic.Int64
	cs := interceptedClient{Interface: real, core: interceptedCore{
		CoreV1Interface: real.CoreV1(),
		pods: func(p corev1client.PodInterface) corev1client.PodInterface {
			return refusingPods{PodInterface: p, name: "refused", refusals: &refusals}
		},
	}}
	writer, err := statuswriter.New(cs.CoreV1(), statuswriter.Options{NodeName: node, BackOff: 10 * time.Millisecond, MaxBackOff: 50 * time.Millisecond})
	require.NoError(t, err)
	// Workers that run nothing and are synced: a pod they do not know is
	// known not to run, as a pod rejected at admission is.
	workers, err := podworker.New(podworker.PodSyncerFuncs[struct{}]{}, podworker.Options[struct{}]{})
	require.NoError(t, err)
	workers.SyncKnownPods(nil)
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); assert.NoError(t, writer.Run(runCtx, workers)) }()
	t.Cleanup(func() { stop(); wg.Wait() })

	// A rejected pod whose reads are refused many times in a row: its
	// status lands once they are allowed.
	refusals.Store(12)
	pod, err := c.admin.CoreV1().Pods("default").Create(ctx, apiPod("refused", node, "/bin/true"), metav1.CreateOptions{})
	require.NoError(t, err)
	writer.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfpods", Message: "Pod was rejected: no room"})
	got := waitForPod(t, c.admin, "default", pod.Name, "Failed", isPhase(v1.PodFailed))
	assert.Equal(t, "OutOfpods", got.Status.Reason)
	assert.LessOrEqual(t, refusals.Load(), int64(0), "every refusal was met, and tried again")

	// WriteTerminated: a refused read of a pod that exists is an error
	// (the caller tries again); of a pod that is gone, there is nothing to
	// write.
	refusals.Store(1)
	assert.True(t, apierrors.IsForbidden(writer.WriteTerminated(ctx, pod)), "a pod that exists but may not be read yet")
	require.NoError(t, c.admin.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	gone, err := real.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err) || apierrors.IsNotFound(err), "the node may not read a pod that is gone: %v %v", gone, err)
	assert.NoError(t, writer.WriteTerminated(ctx, pod), "a pod gone from the API server has no status to write")
}
