package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/lifecycle"
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
	cfg, _ := lifecycle.NewConfig(lifecycle.ConfigOptions{})
	maxPods, _ := lifecycle.NewMaxPodsHandler(1)
	rejected := make(chan string, 1)
	h, err := lifecycle.NewHandler(workers, podmanager.New(), lifecycle.Options{
		AdmitHandlers: []lifecycle.PodAdmitHandler{maxPods},
		RunWorkers:    workers.Run,
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
	_, _ = workers.WaitForStage(ctx, web.UID, podworker.StageFinished)
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

// Config turns full snapshots into the operations the sync loop handles.
func ExampleConfig_Merge() {
	cfg, _ := lifecycle.NewConfig(lifecycle.ConfigOptions{})
	pod := podworkertest.NewPod("uid-1", "default", "web")
	show := func(ups []lifecycle.PodUpdate) {
		for _, u := range ups {
			fmt.Println(u.Op, len(u.Pods))
		}
	}

	ups, _ := cfg.Merge(mirror.ApiserverSource, []*v1.Pod{pod})
	show(ups)
	fmt.Println("source:", ups[0].Pods[0].Annotations[mirror.ConfigSourceAnnotationKey])

	changed := pod.DeepCopy()
	changed.Labels = map[string]string{"v": "2"}
	ups, _ = cfg.Merge(mirror.ApiserverSource, []*v1.Pod{changed})
	show(ups)

	ups, _ = cfg.Merge(mirror.ApiserverSource, nil)
	show(ups)
	// Output:
	// ADD 1
	// source: api
	// UPDATE 1
	// REMOVE 1
}

// PodRequests counts a restartable init container (a sidecar) next to
// both the later init containers and the app.
func ExamplePodRequests() {
	always := v1.ContainerRestartPolicyAlways
	req := func(cpu string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}
	}
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{
			{Name: "proxy", RestartPolicy: &always, Resources: req("100m")},
			{Name: "migrate", Resources: req("1")},
		},
		Containers: []v1.Container{{Name: "app", Resources: req("500m")}},
	}}
	requests := lifecycle.PodRequests(pod)
	fmt.Println(requests.Cpu())
	// Output:
	// 1100m
}

// A manifest directory gives static pods, named after the node.
func ExampleManifestSource_Scan() {
	dir, _ := os.MkdirTemp("", "manifests")
	defer os.RemoveAll(dir)
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\nspec:\n  containers:\n  - name: etcd\n    image: etcd:3.6\n"
	_ = os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte(manifest), 0o644)

	src, _ := lifecycle.NewManifestSource(dir, lifecycle.ManifestOptions{NodeName: "node-a"})
	pods, changed, err := src.Scan()
	fmt.Println(len(pods), changed, err)
	fmt.Println(mirror.PodFullName(pods[0]), mirror.IsStaticPod(pods[0]), *pods[0].Spec.TerminationGracePeriodSeconds)
	// Output:
	// 1 true <nil>
	// etcd-node-a_kube-system true 30
}
