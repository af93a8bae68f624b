package downwardapi

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFormatMap(t *testing.T) {
	require.Equal(t, "", FormatMap(nil))
	require.Equal(t, "a=\"1\"\nb=\"two \\\"words\\\"\\n\"", FormatMap(map[string]string{"b": "two \"words\"\n", "a": "1"}))
}

func TestFieldPath(t *testing.T) {
	for _, tc := range []struct{ version, in, want, err string }{
		{"v1", "metadata.name", "metadata.name", ""},
		{"", "metadata.labels['a']", "metadata.labels['a']", ""},
		{"v1", "spec.host", "spec.nodeName", ""},
		{"v1", "metadata.name['a']", "", "field label does not support subscript: metadata.name['a']"},
		{"apps/v1", "metadata.name", "", "unsupported pod version: apps/v1"},
		{"v1", "['a']", "['a']", ""}, // no path before the subscript: not a subscript; MetadataField refuses it
	} {
		got, err := FieldPath(tc.version, tc.in)
		if tc.err != "" {
			require.EqualError(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
}

func TestMetadataField(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns", UID: "u",
		Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"Example.com/Key": "v"}}}
	for _, tc := range []struct{ path, want, err string }{
		{"metadata.name", "n", ""},
		{"metadata.namespace", "ns", ""},
		{"metadata.uid", "u", ""},
		{"metadata.labels", `app="x"`, ""},
		{"metadata.annotations", `Example.com/Key="v"`, ""},
		{"metadata.annotations['Example.com/Key']", "v", ""},
		{"metadata.labels['app']", "x", ""},
		{"metadata.labels['Bad Key']", "", "invalid key subscript"},
		{"spec.nodeName", "", "unsupported fieldPath: spec.nodeName"},
		{"['a']", "", "unsupported fieldPath: ['a']"},
		{"metadata.name['a']", "", `fieldPath "metadata.name['a']" does not support subscript`},
	} {
		got, err := MetadataField(pod, tc.path)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.path)
			continue
		}
		require.NoError(t, err, tc.path)
		require.Equal(t, tc.want, got, tc.path)
	}
}

func TestResourceValue(t *testing.T) {
	c := &v1.Container{Name: "c", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("0")},
	}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{*c}}}
	alloc := v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Gi")}
	sel := func(res, div string) *v1.ResourceFieldSelector {
		s := &v1.ResourceFieldSelector{Resource: res}
		if div != "" {
			s.Divisor = resource.MustParse(div)
		}
		return s
	}
	for _, tc := range []struct {
		sel  *v1.ResourceFieldSelector
		want string
	}{
		{sel("limits.cpu", ""), "2"},
		{sel("limits.cpu", "1m"), "1500"},
		{sel("limits.cpu", "100m"), "15"},
		{sel("limits.memory", "1Mi"), "2048"}, // a zero limit is unset: the node's
		{sel("limits.ephemeral-storage", ""), "0"},
		{sel("limits.memory", "1Ei"), "1"}, // rounded up, never 0 for a non-zero value
		{&v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}, "1500"},
	} {
		got, err := ResourceValue(tc.sel, pod, c, alloc)
		require.NoError(t, err, tc.sel.Resource)
		require.Equal(t, tc.want, got, "%s / %s", tc.sel.Resource, tc.sel.Divisor.String())
	}
	_, err := ResourceValue(sel("limits.cpu", ""), pod, nil, alloc)
	require.EqualError(t, err, `resourceFieldRef "limits.cpu" names no container`)
	_, err = ResourceValue(sel("cpu", ""), pod, c, alloc)
	require.EqualError(t, err, "unsupported container resource : cpu")
	_, err = ResourceValue(&v1.ResourceFieldSelector{ContainerName: "x", Resource: "limits.cpu"}, nil, nil, alloc)
	require.EqualError(t, err, "container x not found")
}
