package podworker_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/podworker"
)

// An update that coalesces with a pending one (its pod's SyncPod is busy)
// allocates nothing, whatever bookkeeping the engine does for it.
func TestCoalescedUpdateAllocatesNothing(t *testing.T) {
	// entered holds one value: the first SyncPod's send lands even if the
	// test has not yet begun to wait for it (an unbuffered send in a select
	// with a default would be dropped then, and the test would wait
	// forever); later SyncPods find it full and go on.
	entered, release := make(chan struct{}, 1), make(chan struct{})
	syncer := podworker.PodSyncerFuncs[struct{}]{
		SyncPodFunc: func(ctx context.Context, _ podworker.UpdateType, _, _ *v1.Pod, _ struct{}) (bool, error) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
			return false, nil
		},
	}
	w, err := podworker.New[struct{}](syncer, podworker.Options[struct{}]{ResyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		close(release)
		cancel()
		<-done
	}()
	pod := mkPod("p")
	if err := w.UpdatePod(ctx, podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}); err != nil {
		t.Fatal(err)
	}
	<-entered
	opts := podworker.UpdatePodOptions{UpdateType: podworker.SyncPodUpdate, Pod: pod}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := w.UpdatePod(ctx, opts); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a coalesced UpdatePod allocates %v times, want 0", allocs)
	}
}

// The window's answers allocate nothing, for a known UID and an unknown
// one, before and after the engine is synced.
func TestWindowAllocatesNothing(t *testing.T) {
	w, err := podworker.New[struct{}](podworker.PodSyncerFuncs[struct{}]{}, podworker.Options[struct{}]{})
	if err != nil {
		t.Fatal(err)
	}
	pod := mkPod("p")
	if err := w.UpdatePod(context.Background(), podworker.UpdatePodOptions{UpdateType: podworker.SyncPodCreate, Pod: pod}); err != nil {
		t.Fatal(err)
	}
	ask := func() {
		for _, uid := range []types.UID{"p", "unknown"} {
			w.IsPodKnownTerminated(uid)
			w.CouldHaveRunningContainers(uid)
			w.ShouldPodBeFinished(uid)
			w.IsPodTerminationRequested(uid)
			w.ShouldPodContainersBeTerminating(uid)
			w.ShouldPodRuntimeBeRemoved(uid)
			w.ShouldPodContentBeRemoved(uid)
		}
		w.IsPodForMirrorPodTerminatingByFullName("p_ns")
	}
	if allocs := testing.AllocsPerRun(1000, ask); allocs != 0 {
		t.Fatalf("the window's answers allocate %v times before SyncKnownPods, want 0", allocs)
	}
	w.SyncKnownPods([]*v1.Pod{pod})
	if allocs := testing.AllocsPerRun(1000, ask); allocs != 0 {
		t.Fatalf("the window's answers allocate %v times after SyncKnownPods, want 0", allocs)
	}
}
