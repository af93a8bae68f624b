package podmanager_test

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podmanager"
)

// A static pod from a manifest, its mirror pod from the API server, and an
// ordinary pod, as the config sources would feed them to the store.
func ExampleManager() {
	static := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "etcd-node-a", Namespace: "kube-system", UID: "static-uid",
		Annotations: map[string]string{
			mirror.ConfigSourceAnnotationKey: mirror.FileSource,
			mirror.ConfigHashAnnotationKey:   "static-uid",
		},
	}}
	mirrorPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "etcd-node-a", Namespace: "kube-system", UID: "mirror-uid",
		Annotations: map[string]string{
			mirror.ConfigSourceAnnotationKey: mirror.ApiserverSource,
			mirror.ConfigMirrorAnnotationKey: "static-uid",
		},
	}}
	web := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "web", Namespace: "default", UID: "web-uid",
		Annotations: map[string]string{mirror.ConfigSourceAnnotationKey: mirror.ApiserverSource},
	}}

	m := podmanager.New()
	m.SetPod(static)
	m.SetPod(mirrorPod)
	m.SetPod(web)

	var names []string
	for _, p := range m.GetPods() { // mirror pods are not pods to run
		names = append(names, p.Name)
	}
	slices.Sort(names)
	fmt.Println("pods:", names)

	// A user names the static pod by its mirror's UID.
	fmt.Println("translate mirror-uid:", m.TranslatePodUID("mirror-uid"))
	p, mp, wasMirror := m.GetPodAndMirrorPod(mirrorPod)
	fmt.Println("pair:", p.UID, mp.UID, wasMirror)

	// Once the manifest is gone, its mirror is an orphan to delete.
	m.RemovePod(static)
	_, _, orphans := m.GetPodsAndMirrorPods()
	fmt.Println("orphans:", orphans)
	fmt.Println("translate mirror-uid:", m.TranslatePodUID("mirror-uid"))
	// Output:
	// pods: [etcd-node-a web]
	// translate mirror-uid: static-uid
	// pair: static-uid mirror-uid true
	// orphans: [etcd-node-a_kube-system]
	// translate mirror-uid: mirror-uid
}
