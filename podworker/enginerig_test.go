package podworker

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The engine the internal tests that look at its lock, heap or map run
// (handoff, stale timer entries, the records map); podworkertest's, which
// imports this package, is out of their reach.

// versions records, per UID, the ResourceVersions SyncPod was given.
type versions struct {
	mu   sync.Mutex
	seen map[types.UID][]string
}

func (v *versions) syncer() PodSyncer[struct{}] {
	v.seen = map[types.UID][]string{}
	return PodSyncerFuncs[struct{}]{SyncPodFunc: func(_ context.Context, _ UpdateType, pod, _ *v1.Pod, _ struct{}) (bool, error) {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.seen[pod.UID] = append(v.seen[pod.UID], pod.ResourceVersion)
		return false, nil
	},
		SyncTerminatingPodFunc: func(context.Context, *v1.Pod, struct{}, int64, func(*v1.PodStatus)) error { return nil },
		SyncTerminatedPodFunc:  func(context.Context, *v1.Pod, struct{}) error { return nil },
	}
}

func (v *versions) of(uid types.UID) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.seen[uid]...)
}

func versionedPod(uid string, rv int) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid), ResourceVersion: strconv.Itoa(rv)}}
}

// startEngine runs an engine over v's syncer until the test ends, with
// opts; resyncs are off unless opts asks for them.
func startEngine(t *testing.T, v *versions, opts Options[struct{}]) (w *PodWorkers[struct{}], stop func()) {
	t.Helper()
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = -1
	}
	w, err := New(v.syncer(), opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-ran)
		})
	}
	t.Cleanup(stop)
	return w, stop
}
