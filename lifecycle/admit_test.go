package lifecycle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podkit/podkit/lifecycle"
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
			got := lifecycle.PodRequests(&v1.Pod{Spec: tc.spec})
			wantCPU, wantMem := resource.MustParse(tc.cpu), resource.MustParse(tc.mem)
			assert.Zero(t, wantCPU.Cmp(got[v1.ResourceCPU]), "cpu: got %s", got.Cpu())
			assert.Zero(t, wantMem.Cmp(got[v1.ResourceMemory]), "memory: got %s", got.Memory())
		})
	}
	assert.Empty(t, lifecycle.PodRequests(nil))
}

func TestResourceFitHandler(t *testing.T) {
	allocatable := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}
	h, err := lifecycle.NewResourceFitHandler(func() v1.ResourceList { return allocatable })
	require.NoError(t, err)
	pod := func(cpu, mem string) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{container("c", cpu, mem)}}}
	}
	others := []*v1.Pod{pod("1", "512Mi")}
	ctx := context.Background()

	assert.True(t, h.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: pod("1", "512Mi"), OtherPods: others}).Admit, "exactly full fits")
	assert.True(t, h.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: pod("", ""), OtherPods: []*v1.Pod{pod("2", "1Gi")}}).Admit, "no request always fits")

	r := h.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: pod("1001m", "1Gi"), OtherPods: others})
	assert.False(t, r.Admit)
	assert.Equal(t, lifecycle.ReasonOutOfCPU, r.Reason, "CPU is checked first")
	assert.Equal(t, "Node didn't have enough resource: cpu, requested: 1001, used: 1000, capacity: 2000", r.Message)

	r = h.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: pod("", "513Mi"), OtherPods: others})
	assert.Equal(t, lifecycle.ReasonOutOfMemory, r.Reason)
	assert.Equal(t, "Node didn't have enough resource: memory, requested: 537919488, used: 536870912, capacity: 1073741824", r.Message)

	// A resource the allocatable does not list is not checked.
	cpuOnly, err := lifecycle.NewResourceFitHandler(func() v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")} })
	require.NoError(t, err)
	assert.True(t, cpuOnly.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: pod("", "100Gi")}).Admit)

	assert.False(t, h.Admit(ctx, &lifecycle.PodAdmitAttributes{}).Admit)
	assert.False(t, h.Admit(ctx, nil).Admit)
	_, err = lifecycle.NewResourceFitHandler(nil)
	assert.ErrorContains(t, err, "lifecycle: ")
}

func TestMaxPodsHandler(t *testing.T) {
	h, err := lifecycle.NewMaxPodsHandler(2)
	require.NoError(t, err)
	ctx := context.Background()
	p := &v1.Pod{}
	assert.True(t, h.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: p, OtherPods: []*v1.Pod{{}}}).Admit)
	r := h.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: p, OtherPods: []*v1.Pod{{}, {}}})
	assert.False(t, r.Admit)
	assert.Equal(t, lifecycle.ReasonOutOfPods, r.Reason)
	assert.Equal(t, "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2", r.Message)
	assert.False(t, h.Admit(ctx, nil).Admit)
	for _, bad := range []int{0, -1} {
		_, err := lifecycle.NewMaxPodsHandler(bad)
		assert.ErrorContains(t, err, "lifecycle: ")
	}
}

func TestAdmissionOrderAndReasonlessRejection(t *testing.T) {
	var asked []string
	handler := func(name string, r lifecycle.PodAdmitResult) lifecycle.PodAdmitHandler {
		return lifecycle.PodAdmitHandlerFunc(func(ctx context.Context, attrs *lifecycle.PodAdmitAttributes) lifecycle.PodAdmitResult {
			asked = append(asked, name)
			assert.Equal(t, lifecycle.AddOperation, attrs.Operation)
			return r
		})
	}
	bubble(t, func(t *testing.T) {
		e := newEnv(t, func(o *lifecycle.Options) {
			o.AdmitHandlers = []lifecycle.PodAdmitHandler{
				handler("yes", lifecycle.PodAdmitResult{Admit: true}),
				handler("mute", lifecycle.PodAdmitResult{}),
				handler("never asked", lifecycle.PodAdmitResult{Reason: "Late"}),
			}
		})
		e.h.HandlePodAdditions(e.ctx, []*v1.Pod{apiPod("p", "p", 0)})
		assert.Equal(t, []string{"yes", "mute"}, asked)
		rej := e.rejections()
		require.Len(t, rej, 1)
		assert.Equal(t, lifecycle.ReasonUnexpectedAdmissionError, rej[0].Status.Reason)
	})
}
