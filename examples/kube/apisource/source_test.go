package apisource

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The informer's transform drops a pod's managed fields, which nothing on
// a node reads, and keeps the rest; what is not a pod passes as it came.
func TestDropManagedFields(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "p", Namespace: "default",
		Annotations:   map[string]string{"a": "kept"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}}
	got, err := dropManagedFields(pod)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := got.(*v1.Pod)
	if !ok {
		t.Fatalf("dropManagedFields returned a %T, want *v1.Pod", got)
	}
	if p.ManagedFields != nil {
		t.Errorf("the pod's managed fields were kept: %v", p.ManagedFields)
	}
	if p.Name != "p" || p.Annotations["a"] != "kept" {
		t.Errorf("the pod changed beyond its managed fields: %+v", p.ObjectMeta)
	}
	marker := "not a pod"
	if got, err := dropManagedFields(marker); err != nil || got != marker {
		t.Errorf("dropManagedFields(%q) = %v, %v; want it back unchanged", marker, got, err)
	}
}
