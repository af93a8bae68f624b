package syncerwrap_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/examples/kube/internal/syncerwrap"
	"github.com/podkit/podkit/podworker"
)

// plainSyncer is a PodSyncer without the runtime-pod hook.
type plainSyncer struct{ podworker.PodSyncer[struct{}] }

func TestAsKeepsTheInnerSyncersCapability(t *testing.T) {
	var outerSynced bool
	hooks := podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(context.Context, podworker.UpdateType, *v1.Pod, *v1.Pod, struct{}) (bool, error) {
			outerSynced = true
			return false, nil
		},
	}

	plain := syncerwrap.As[struct{}](plainSyncer{podworker.PodSyncerFuncs[struct{}]{}}, hooks)
	_, isRuntime := plain.(podworker.RuntimePodSyncer)
	assert.False(t, isRuntime, "a wrapper of a syncer without the runtime hook has none")
	_, err := plain.SyncPod(context.Background(), podworker.SyncPodCreate, nil, nil, struct{}{})
	require.NoError(t, err)
	assert.True(t, outerSynced, "the wrapper's hooks run")

	var innerKilled podworker.RuntimePod
	inner := podworker.PodSyncerFuncs[struct{}]{SyncTerminatingRuntimePodFunc: func(_ context.Context, p podworker.RuntimePod) error {
		innerKilled = p
		return nil
	}}
	wrapped := syncerwrap.As[struct{}](inner, hooks)
	rs, isRuntime := wrapped.(podworker.RuntimePodSyncer)
	require.True(t, isRuntime, "a wrapper of a runtime-pod syncer is one")
	require.NoError(t, rs.SyncTerminatingRuntimePod(context.Background(), podworker.RuntimePod{UID: "u"}))
	assert.Equal(t, podworker.RuntimePod{UID: "u"}, innerKilled, "the inner syncer's hook serves it when the wrapper sets none")
}
