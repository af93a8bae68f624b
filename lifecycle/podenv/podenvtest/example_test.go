package podenvtest_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/lifecycle/podenv/podenvtest"
)

// Objects stands in for an agent's getter in tests: objects set, a missing
// one NotFound, reads counted.
func ExampleObjects() {
	objects := &podenvtest.Objects{}
	objects.SetSecret(&v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"},
		StringData: map[string]string{"password": "s3cret"},
	})
	s, _ := objects.GetSecret(context.Background(), "shop", "db")
	fmt.Println(len(s.Data["password"]))
	_, err := objects.GetConfigMap(context.Background(), "shop", "app")
	fmt.Println(apierrors.IsNotFound(err), err)
	fmt.Println(objects.Reads(podenvtest.KindSecret, "shop", "db"))
	// Output:
	// 6
	// true configmap "app" not found
	// 1
}
