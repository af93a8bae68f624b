package volume_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/lifecycle/podenv/podenvtest"
	"github.com/podkit/podkit/lifecycle/volume"
)

// exampleWindow stands in for the engine (*podworker.PodWorkers): the
// pod runs until deleted is set.
type exampleWindow struct{ deleted bool }

func (w *exampleWindow) ShouldPodContentBeRemoved(types.UID) bool  { return w.deleted }
func (w *exampleWindow) CouldHaveRunningContainers(types.UID) bool { return !w.deleted }

// A runtime prepares a pod's volumes in its SyncPod, mounts each host
// path, sees a config map's update swapped in, and the volumes go once the
// pod's content may be removed.
func ExampleManager_SetUp() {
	root, _ := os.MkdirTemp("", "volumes")
	defer os.RemoveAll(root)
	objects := &podenvtest.Objects{} // the agent's getter
	objects.SetConfigMap(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nginx"},
		Data:       map[string]string{"nginx.conf": "listen 80;"},
	})
	engine := &exampleWindow{}
	m, err := volume.New(root, objects, engine, volume.Options{
		// The files' owners: here the agent's own user (it need not be root).
		MapIDs: func(*v1.Pod, int, int) (int, int, error) { return os.Getuid(), os.Getgid(), nil },
	})
	if err != nil {
		panic(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-1"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "nginx"}}}},
			{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		}},
	}
	if err := volume.Unsupported(pod); err != nil { // in admission
		panic(err)
	}
	if err := m.SetUp(context.Background(), pod); err != nil { // in SyncPod
		panic(err)
	}
	conf, _ := m.HostPath(pod.UID, "conf") // bind-mount it at the mount's mountPath
	rel, _ := filepath.Rel(root, conf)
	data, _ := os.ReadFile(filepath.Join(conf, "nginx.conf"))
	fmt.Printf("%s: %s\n", rel, data)

	objects.SetConfigMap(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nginx"},
		Data:       map[string]string{"nginx.conf": "listen 8080;"},
	})
	_ = m.SetUp(context.Background(), pod) // the next sync (or Run's refresh)
	data, _ = os.ReadFile(filepath.Join(conf, "nginx.conf"))
	fmt.Printf("%s: %s\n", rel, data)

	engine.deleted = true
	removed, _ := m.TearDown(pod.UID) // in SyncTerminatedPod, or by Run
	_, err = os.Stat(conf)
	fmt.Println(removed, os.IsNotExist(err))
	// Output:
	// uid-1/conf: listen 80;
	// uid-1/conf: listen 8080;
	// true true
}
