package podworker_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

func TestSmokeLifecycle(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	rec := func(s string) { mu.Lock(); calls = append(calls, s); mu.Unlock() }
	syncer := podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(ctx context.Context, ut podworker.UpdateType, pod, mirror *v1.Pod, _ struct{}) (bool, error) {
			rec("sync:" + ut.String())
			return false, nil
		},
		SyncTerminatingPodFunc: func(ctx context.Context, pod *v1.Pod, _ struct{}, g int64, fn func(*v1.PodStatus)) error {
			rec("terminating")
			return nil
		},
		SyncTerminatedPodFunc: func(ctx context.Context, pod *v1.Pod, _ struct{}) error {
			rec("terminated")
			return nil
		},
	}
	w, err := podworker.New[struct{}](syncer, podworker.Options[struct{}]{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: types.UID("u1")}}
	require.NoError(t, w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}))
	require.NoError(t, w.KillPod(ctx, pod, podworker.KillPodOptions{}))
	_, _, err = w.WaitFor(ctx, "u1", func(i podworker.PodInfo, ok bool) bool { return i.Finished })
	require.NoError(t, err)
	cancel()
	require.NoError(t, <-done)
	t.Log(calls)
	require.Equal(t, "terminated", calls[len(calls)-1])
	require.ErrorIs(t, w.UpdatePod(context.Background(), podworker.UpdatePodOptions{Pod: pod}), podworker.ErrStopped)
}
