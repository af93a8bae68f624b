package virtualkubelet_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vk "github.com/podkit/podkit/examples/virtualkubelet"
	"github.com/podkit/podkit/examples/virtualkubelet/simcloud"
)

// The provider on its own, driven the way virtual-kubelet's PodController
// drives it: CreatePod, then DeletePod once the API server has set the
// deletion timestamp. Statuses come back through NotifyPods.
func Example() {
	cloud, err := simcloud.New(simcloud.Options{})
	if err != nil {
		panic(err)
	}
	provider, err := vk.New(cloud, vk.Options{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- provider.Run(ctx) }()

	phases := make(chan v1.PodPhase, 10)
	provider.NotifyPods(ctx, func(pod *v1.Pod) { phases <- pod.Status.Phase })

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "6c1a"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx:1"}}},
	}
	if err := provider.CreatePod(ctx, pod); err != nil {
		panic(err)
	}
	fmt.Println(<-phases)

	deleting := pod.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, new(int64(10))
	if err := provider.DeletePod(ctx, deleting); err != nil {
		panic(err)
	}
	fmt.Println(<-phases)

	for _, call := range cloud.Calls(simcloud.OpCreate, simcloud.OpStop) {
		fmt.Println(call.Op, call.Grace)
	}
	cancel()
	if err := <-done; err != nil {
		panic(err)
	}
	// Output:
	// Running
	// Succeeded
	// create 0s
	// stop 10s
}
