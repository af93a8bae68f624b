package admission_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podkit/podkit/lifecycle/admission"
)

func container(name, cpu, mem string) v1.Container {
	c := v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}}}
	if cpu != "" {
		c.Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		c.Resources.Requests[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return c
}

func sidecar(name, cpu, mem string) v1.Container {
	c := container(name, cpu, mem)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func TestPodRequests(t *testing.T) {
	for name, tc := range map[string]struct {
		spec     v1.PodSpec
		cpu, mem string
	}{
		"containers add up": {
			spec: v1.PodSpec{Containers: []v1.Container{container("a", "100m", "100Mi"), container("b", "200m", "")}},
			cpu:  "300m", mem: "100Mi",
		},
		"a big init container wins": {
			spec: v1.PodSpec{
				InitContainers: []v1.Container{container("init", "2", "50Mi")},
				Containers:     []v1.Container{container("a", "100m", "100Mi")},
			},
			cpu: "2", mem: "100Mi",
		},
		"sidecars run with the later init containers and the app": {
			spec: v1.PodSpec{
				InitContainers: []v1.Container{
					container("first", "500m", ""), // alone: 500m
					sidecar("proxy", "200m", "64Mi"),
					container("migrate", "1", "10Mi"), // next to proxy: 1200m, 74Mi
				},
				Containers: []v1.Container{container("app", "300m", "100Mi")}, // with proxy: 500m, 164Mi
			},
			cpu: "1200m", mem: "164Mi",
		},
		"pod-level requests replace the containers'": {
			spec: v1.PodSpec{
				Resources:  &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}},
				Containers: []v1.Container{container("a", "100m", "100Mi")},
			},
			cpu: "1500m", mem: "100Mi",
		},
		"overhead is added": {
			spec: v1.PodSpec{
				Overhead:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("20Mi")},
				Containers: []v1.Container{container("a", "100m", "100Mi")},
			},
			cpu: "150m", mem: "120Mi",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := admission.PodRequests(&v1.Pod{Spec: tc.spec})
			wantCPU, wantMem := resource.MustParse(tc.cpu), resource.MustParse(tc.mem)
			assert.Zero(t, wantCPU.Cmp(got[v1.ResourceCPU]), "cpu: got %s", got.Cpu())
			assert.Zero(t, wantMem.Cmp(got[v1.ResourceMemory]), "memory: got %s", got.Memory())
		})
	}
	assert.Empty(t, admission.PodRequests(nil))
}

func TestResourceFitHandler(t *testing.T) {
	allocatable := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}
	h, err := admission.NewResourceFitHandler(func() v1.ResourceList { return allocatable })
	require.NoError(t, err)
	pod := func(cpu, mem string) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{container("c", cpu, mem)}}}
	}
	others := []*v1.Pod{pod("1", "512Mi")}
	ctx := context.Background()

	assert.True(t, h.Admit(ctx, &admission.Attributes{Pod: pod("1", "512Mi"), OtherPods: others}).Admit, "exactly full fits")
	assert.True(t, h.Admit(ctx, &admission.Attributes{Pod: pod("", ""), OtherPods: []*v1.Pod{pod("2", "1Gi")}}).Admit, "no request always fits")

	r := h.Admit(ctx, &admission.Attributes{Pod: pod("1001m", "1Gi"), OtherPods: others})
	assert.False(t, r.Admit)
	assert.Equal(t, admission.ReasonOutOfCPU, r.Reason, "CPU is checked first")
	assert.Equal(t, "Node didn't have enough resource: cpu, requested: 1001, used: 1000, capacity: 2000", r.Message)

	r = h.Admit(ctx, &admission.Attributes{Pod: pod("", "513Mi"), OtherPods: others})
	assert.Equal(t, admission.ReasonOutOfMemory, r.Reason)
	assert.Equal(t, "Node didn't have enough resource: memory, requested: 537919488, used: 536870912, capacity: 1073741824", r.Message)

	// A resource the allocatable does not list is not checked.
	cpuOnly, err := admission.NewResourceFitHandler(func() v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")} })
	require.NoError(t, err)
	assert.True(t, cpuOnly.Admit(ctx, &admission.Attributes{Pod: pod("", "100Gi")}).Admit)

	assert.False(t, h.Admit(ctx, &admission.Attributes{}).Admit)
	assert.False(t, h.Admit(ctx, nil).Admit)
	_, err = admission.NewResourceFitHandler(nil)
	assert.ErrorContains(t, err, "admission: ")
}

func TestMaxPodsHandler(t *testing.T) {
	h, err := admission.NewMaxPodsHandler(2)
	require.NoError(t, err)
	ctx := context.Background()
	p := &v1.Pod{}
	assert.True(t, h.Admit(ctx, &admission.Attributes{Pod: p, OtherPods: []*v1.Pod{{}}}).Admit)
	r := h.Admit(ctx, &admission.Attributes{Pod: p, OtherPods: []*v1.Pod{{}, {}}})
	assert.False(t, r.Admit)
	assert.Equal(t, admission.ReasonOutOfPods, r.Reason)
	assert.Equal(t, "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2", r.Message)
	assert.False(t, h.Admit(ctx, nil).Admit)
	for _, bad := range []int{0, -1} {
		_, err := admission.NewMaxPodsHandler(bad)
		assert.ErrorContains(t, err, "admission: ")
	}
}

func TestChain(t *testing.T) {
	var asked []string
	handler := func(name string, r admission.Result) admission.Handler {
		return admission.HandlerFunc(func(ctx context.Context, attrs *admission.Attributes) admission.Result {
			asked = append(asked, name)
			return r
		})
	}
	attrs := &admission.Attributes{Pod: &v1.Pod{}, Operation: admission.AddOperation}
	ctx := context.Background()

	assert.Equal(t, admission.Result{Admit: true}, admission.Chain(nil).Admit(ctx, attrs), "an empty chain admits")

	r := admission.Chain{
		handler("yes", admission.Result{Admit: true}),
		handler("no", admission.Result{Reason: "Full", Message: "no room"}),
		handler("never asked", admission.Result{Admit: true}),
	}.Admit(ctx, attrs)
	assert.Equal(t, admission.Result{Reason: "Full", Message: "no room"}, r, "the first rejection wins")
	assert.Equal(t, []string{"yes", "no"}, asked)

	r = admission.Chain{handler("mute", admission.Result{})}.Admit(ctx, attrs)
	assert.Equal(t, admission.ReasonUnexpectedAdmissionError, r.Reason, "a rejection without a reason gets one")
	assert.NotEmpty(t, r.Message)
	r = admission.Chain{handler("terse", admission.Result{Message: "why not"})}.Admit(ctx, attrs)
	assert.Equal(t, admission.Result{Reason: admission.ReasonUnexpectedAdmissionError, Message: "why not"}, r, "its message is kept")

	asked = nil
	r = admission.Chain{handler("yes", admission.Result{Admit: true}), nil, handler("after", admission.Result{Admit: true})}.Admit(ctx, attrs)
	assert.False(t, r.Admit, "a nil handler rejects instead of panicking")
	assert.Equal(t, admission.ReasonUnexpectedAdmissionError, r.Reason)
	assert.Contains(t, r.Message, "handler 1")
	assert.Equal(t, []string{"yes"}, asked)
}
