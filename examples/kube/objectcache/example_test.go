package objectcache_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podkit/podkit/examples/kube/objectcache"
)

// A Cache watches what a registered pod references, and nothing else.
func ExampleCache() {
	client := fake.NewClientset( // the node's own client, in an agent
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}, Data: map[string][]byte{"password": []byte("s3cret")}},
	)
	c, err := objectcache.New(client, objectcache.Options{
		RequestSync: func(uid types.UID) {}, // the engine's Resync, in an agent
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web", Env: []v1.EnvVar{{
			Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "password"}},
		}}}}},
	}
	c.RegisterPod(pod)                                        // in SyncPod
	s, err := c.GetSecret(context.Background(), "shop", "db") // through podenv or volume
	fmt.Println(len(s.Data["password"]), err)
	fmt.Println(c.Watching())
	c.UnregisterPod(pod.UID) // in SyncTerminatedPod
	fmt.Println(c.Watching())

	stop()
	fmt.Println(<-done)
	// Output:
	// 6 <nil>
	// [secret shop/db]
	// []
	// <nil>
}
