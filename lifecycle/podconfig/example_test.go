package podconfig_test

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker/podworkertest"
)

// Config turns full snapshots into the operations the sync loop handles.
func ExampleConfig_Merge() {
	cfg, _ := podconfig.New(podconfig.Options{})
	pod := podworkertest.NewPod("uid-1", "default", "web")
	show := func(ups []podconfig.PodUpdate) {
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

// A manifest directory gives static pods, named after the node.
func ExampleManifestSource_Scan() {
	dir, _ := os.MkdirTemp("", "manifests")
	defer os.RemoveAll(dir)
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\nspec:\n  containers:\n  - name: etcd\n    image: etcd:3.6\n"
	_ = os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte(manifest), 0o644)

	src, _ := podconfig.NewManifestSource(dir, podconfig.ManifestOptions{NodeName: "node-a"})
	pods, changed, err := src.Scan()
	fmt.Println(len(pods), changed, err)
	fmt.Println(mirror.PodFullName(pods[0]), mirror.IsStaticPod(pods[0]), *pods[0].Spec.TerminationGracePeriodSeconds)
	// Output:
	// 1 true <nil>
	// etcd-node-a_kube-system true 30
}
