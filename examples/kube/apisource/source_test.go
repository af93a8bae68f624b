package apisource_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podkit/podkit/examples/kube/apisource"
	"github.com/podkit/podkit/lifecycle/podconfig"
)

// The pods a Source sends carry no managed fields: nothing on a node
// reads them, and the informer would keep a few KiB of them per pod.
func TestSourceDropsManagedFields(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "default", UID: "uid-p",
			Annotations:   map[string]string{"a": "kept"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Spec: v1.PodSpec{NodeName: "node-1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	client := fake.NewClientset(pod)
	src, err := apisource.New(client.CoreV1(), "node-1", apisource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan []*v1.Pod, 1)
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, podconfig.PodSinkFunc(func(_ context.Context, _ string, pods []*v1.Pod) error {
			copies := make([]*v1.Pod, len(pods))
			for i, p := range pods {
				copies[i] = p.DeepCopy()
			}
			select {
			case got <- copies:
			default:
			}
			return nil
		}))
	}()
	pods := <-got
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(pods) != 1 {
		t.Fatalf("the first snapshot has %d pods, want 1", len(pods))
	}
	if mf := pods[0].ManagedFields; mf != nil {
		t.Errorf("the pod's managed fields were kept: %v", mf)
	}
	if a := pods[0].Annotations["a"]; a != "kept" {
		t.Errorf("the pod's annotation a = %q, want kept", a)
	}
}
