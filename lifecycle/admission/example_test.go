package admission_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podkit/podkit/lifecycle/admission"
)

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
	requests := admission.PodRequests(pod)
	fmt.Println(requests.Cpu())
	// Output:
	// 1100m
}
