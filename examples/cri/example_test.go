package cri_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"

	"github.com/podkit/podkit/examples/cri"
	"github.com/podkit/podkit/podworker"
)

// A pod's life through the syncer's hooks, on cri-api's fake runtime (an
// agent hands the Syncer to podworker.New instead of calling the hooks).
func Example() {
	runtime := fakeapi.NewFakeRuntimeService() // or cri.Dial("unix:///run/containerd/containerd.sock")
	images := fakeapi.NewFakeImageService()
	images.SetFakeImages([]string{"busybox:1"})
	syncer, err := cri.New(runtime, runtime, cri.Options{Images: images, RuntimeName: "fake"})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{
			{Name: "server", Image: "busybox:1", Command: []string{"httpd", "-f"}},
		}},
	}
	if _, err := syncer.SyncPod(ctx, podworker.SyncPodCreate, pod, nil, nil); err != nil {
		fmt.Println(err)
		return
	}
	status, _ := syncer.PodStatus(ctx, pod.UID, time.Time{})
	api := status.APIStatus(pod)
	fmt.Println(api.Phase, api.PodIP, api.ContainerStatuses[0].Ready)

	_ = syncer.SyncTerminatingPod(ctx, pod, nil, 30, nil)
	status, _ = syncer.PodStatus(ctx, pod.UID, time.Time{})
	fmt.Println("nothing running:", syncer.NothingRunning(status))

	_ = syncer.SyncTerminatedPod(ctx, pod, nil)
	pods, _ := syncer.ListRuntimePods(ctx)
	fmt.Println("left in the runtime:", len(pods))
	// Output:
	// Running 192.168.192.168 true
	// nothing running: true
	// left in the runtime: 0
}
