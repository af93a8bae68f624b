package lifecycle_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/lifecycle"
	"github.com/podkit/podkit/lifecycle/admission"
	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podmanager"
	"github.com/podkit/podkit/podworker"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// A whole sync loop: a Config merges the API server's snapshots, the
// Handler admits pods and drives the pod workers, and Run owns the workers'
// lifetime. Here the node has room for one pod, so the second is rejected.
func ExampleHandler() {
	syncer := podworkertest.NewFakeSyncer[struct{}]()
	workers, _ := podworker.New[struct{}](syncer, podworker.Options[struct{}]{})
	cfg, _ := podconfig.New(podconfig.Options{})
	maxPods, _ := admission.NewMaxPodsHandler(1)
	rejected := make(chan string, 1)
	h, err := lifecycle.NewHandler(workers, podmanager.New(), lifecycle.Options{
		AdmitHandlers: []admission.Handler{maxPods},
		OnReject: func(_ context.Context, pod *v1.Pod, status v1.PodStatus) {
			rejected <- pod.Name + ": " + status.Reason + ": " + status.Message
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.Run(ctx, cfg.Updates()) }()

	web := podworkertest.NewPod("web-uid", "default", "web")
	batch := podworkertest.NewPod("batch-uid", "default", "batch")
	batch.CreationTimestamp = metav1.Unix(1, 0) // added after web
	_ = cfg.SetPods(ctx, mirror.ApiserverSource, []*v1.Pod{batch, web})
	_ = syncer.WaitForTrace(ctx, web.UID, "sync:create")
	fmt.Println(<-rejected)

	// The API server no longer has the pods: web is stopped.
	_ = cfg.SetPods(ctx, mirror.ApiserverSource, nil)
	_, _ = podworkertest.WaitForStage(ctx, workers, web.UID, podworker.StageFinished)
	fmt.Println("web:", syncer.Trace(web.UID))
	fmt.Println("batch:", syncer.Trace(batch.UID) == "")

	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// batch: OutOfpods: Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1
	// web: sync:create kill(30) terminated
	// batch: true
	// Run: <nil>
}
