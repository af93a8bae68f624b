package deadline_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/lifecycle/deadline"
	"github.com/podkit/podkit/podworker"
)

// A runtime's SyncPod checks the pod's deadline; the manager's timer asks
// for a sync when it passes, and that sync ends the pod Failed.
func Example() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	workers, _ := podworker.New[struct{}](podworker.PodSyncerFuncs[struct{}]{}, podworker.Options[struct{}]{})
	syncs := make(chan types.UID, 1)
	m, _ := deadline.New(workers, deadline.Options{Clock: clk, RequestSync: func(uid types.UID) { syncs <- uid }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()

	limit := int64(60)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{ActiveDeadlineSeconds: &limit},
	}
	status := v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: clk.Now()}}

	// SyncPod: not past yet.
	past, _ := m.Check(pod, status.StartTime)
	fmt.Println("past at start:", past)

	clk.Step(time.Minute)
	fmt.Println("sync requested for", <-syncs)

	// The SyncPod it asked for.
	if past, _ := m.Check(pod, status.StartTime); past {
		deadline.MarkFailed(&status) // and SyncPod returns terminal
	}
	fmt.Println(status.Phase, status.Reason)
	fmt.Println(status.Message)

	cancel()
	<-done
	// Output:
	// past at start: false
	// sync requested for uid-1
	// Failed DeadlineExceeded
	// Pod was active on the node longer than the specified deadline
}
