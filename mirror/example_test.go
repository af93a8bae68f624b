package mirror_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/mirror/mirrortest"
)

// A static pod's life as seen by the API server: its mirror is created, a
// second create is a no-op, and it is deleted by full name when the static pod
// goes away. FakePodAPI stands in for the API server; over a real one, wrap a
// clientset with PodAPIFuncs.
func ExampleNewClient() {
	ctx := context.Background()
	api := mirrortest.NewFakePodAPI()
	nodeUID := func(context.Context) (types.UID, error) { return "node-uid-1", nil }
	client, err := mirror.NewClient(api, mirror.ClientOptions{NodeName: "node-a", NodeUID: nodeUID})
	if err != nil {
		fmt.Println(err)
		return
	}

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "kube-system", UID: "etcd-v1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Image: "etcd:3.6"}}},
	}
	if err := mirror.PrepareStaticPod(pod, "node-a", mirror.FileSource); err != nil {
		fmt.Println(err)
		return
	}

	fmt.Println("create:", client.CreateMirrorPod(ctx, pod))
	fmt.Println("create again:", client.CreateMirrorPod(ctx, pod))
	m, _ := api.Pod("kube-system", "etcd-node-a")
	fmt.Println("mirror of the static pod:", mirror.IsMirrorPodOf(m, pod))
	fmt.Println("owner:", m.OwnerReferences[0].Kind, m.OwnerReferences[0].Name)

	deleted, err := client.DeleteMirrorPod(ctx, mirror.PodFullName(pod), &m.UID)
	fmt.Println("deleted:", deleted, err)
	deleted, err = client.DeleteMirrorPod(ctx, mirror.PodFullName(pod), &m.UID)
	fmt.Println("deleted again:", deleted, err)
	// Output:
	// create: <nil>
	// create again: <nil>
	// mirror of the static pod: true
	// owner: Node node-a
	// deleted: true <nil>
	// deleted again: false <nil>
}

func ExampleParsePodFullName() {
	name, namespace, err := mirror.ParsePodFullName("etcd-node-a_kube-system")
	fmt.Println(name, namespace, err)
	_, _, err = mirror.ParsePodFullName("etcd_node_a")
	fmt.Println(err)
	// Output:
	// etcd-node-a kube-system <nil>
	// mirror: invalid pod full name "etcd_node_a": want exactly one "_" between a non-empty name and namespace
}
