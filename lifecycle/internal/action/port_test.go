package action

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestResolvePort(t *testing.T) {
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "bad", ContainerPort: 70000}}}
	for _, tc := range []struct {
		name string
		port intstr.IntOrString
		want int
		err  string
	}{
		{"number", intstr.FromInt32(80), 80, ""},
		{"name", intstr.FromString("http"), 8080, ""},
		{"unknown name", intstr.FromString("grpc"), 0, `port "grpc" not found`},
		{"zero", intstr.FromInt32(0), 0, "invalid port number: 0"},
		{"too big", intstr.FromInt32(65536), 0, "invalid port number: 65536"},
		{"named port out of range", intstr.FromString("bad"), 0, "invalid port number: 70000"},
		{"no kind", intstr.IntOrString{Type: 7}, 0, "neither a number nor a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolvePort(tc.port, c)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := ResolvePort(intstr.FromString("http"), nil)
	assert.Error(t, err, "a nil container declares no port")
}

func TestContainerRef(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", ResourceVersion: "7"},
		Spec: v1.PodSpec{
			InitContainers:      []v1.Container{{Name: "init"}},
			Containers:          []v1.Container{{Name: "app"}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}},
		},
	}
	for name, path := range map[string]string{
		"app":   "spec.containers{app}",
		"init":  "spec.initContainers{init}",
		"debug": "spec.ephemeralContainers{debug}",
		"other": "implicitly required container other",
	} {
		ref := ContainerRef(pod, name)
		assert.Equal(t, path, ref.FieldPath)
		assert.Equal(t, v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "7", FieldPath: path}, *ref)
	}
}
