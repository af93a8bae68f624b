package statuswriter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podkit/podkit/examples/kube/statuswriter"
	"github.com/podkit/podkit/podworker"
)

// TestWrapSyncerKeepsTheRuntimeHook: the wrapper stops runtime pods with
// the wrapped syncer's hook, and says it cannot (ErrNotImplemented, which
// the engine retries) when the wrapped syncer has no such hook.
func TestWrapSyncerKeepsTheRuntimeHook(t *testing.T) {
	writer, err := statuswriter.New(fake.NewClientset().CoreV1(), statuswriter.Options{})
	require.NoError(t, err)
	status := func(context.Context, *v1.Pod) (v1.PodStatus, error) { return v1.PodStatus{}, nil }
	rp := podworker.RuntimePod{UID: "orphan", Namespace: "ns", Name: "orphan"}
	var killed []podworker.RuntimePod
	inner := podworker.PodSyncerFuncs[struct{}]{SyncTerminatingRuntimePodFunc: func(_ context.Context, p podworker.RuntimePod) error {
		killed = append(killed, p)
		return nil
	}}

	require.NoError(t, podworker.SyncTerminatingRuntimePod(context.Background(), statuswriter.WrapSyncer[struct{}](inner, writer, status), rp))
	assert.Equal(t, []podworker.RuntimePod{rp}, killed, "the wrapped syncer's hook ran")

	plain := struct{ podworker.PodSyncer[struct{}] }{inner}
	err = podworker.SyncTerminatingRuntimePod(context.Background(), statuswriter.WrapSyncer[struct{}](plain, writer, status), rp)
	require.ErrorIs(t, err, podworker.ErrNotImplemented)
	assert.Len(t, killed, 1, "a hook the wrapped syncer hides is not called")
}
