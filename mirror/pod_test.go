package mirror_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podkit/podkit/mirror"
)

func podWith(name, namespace string, annotations map[string]string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: annotations}}
}

func TestParsePodFullName(t *testing.T) {
	valid := []struct {
		fullName, name, namespace string
	}{
		{"web_prod", "web", "prod"},
		{"etcd.node-1_kube-system", "etcd.node-1", "kube-system"},
		{"a_b", "a", "b"},
	}
	for _, tc := range valid {
		t.Run(tc.fullName, func(t *testing.T) {
			name, namespace, err := mirror.ParsePodFullName(tc.fullName)
			require.NoError(t, err)
			assert.Equal(t, tc.name, name)
			assert.Equal(t, tc.namespace, namespace)
			assert.Equal(t, tc.fullName, mirror.BuildPodFullName(name, namespace), "round trip")
		})
	}

	invalid := []string{"", "_", "web", "web_", "_prod", "web_prod_extra", "web__prod", "__"}
	for _, fullName := range invalid {
		t.Run("invalid "+fullName, func(t *testing.T) {
			name, namespace, err := mirror.ParsePodFullName(fullName)
			require.ErrorIs(t, err, mirror.ErrInvalidFullName)
			assert.Contains(t, err.Error(), "mirror: ")
			assert.Empty(t, name)
			assert.Empty(t, namespace)
		})
	}
}

func TestPodFullName(t *testing.T) {
	assert.Equal(t, "web_prod", mirror.PodFullName(podWith("web", "prod", nil)))
	assert.Equal(t, "", mirror.PodFullName(nil))
}

func TestIsStaticPodAndIsMirrorPod(t *testing.T) {
	tests := []struct {
		name           string
		pod            *v1.Pod
		static, mirror bool
	}{
		{"nil pod", nil, false, false},
		{"no annotations", podWith("p", "ns", nil), false, false},
		{"file source", podWith("p", "ns", map[string]string{mirror.ConfigSourceAnnotationKey: mirror.FileSource}), true, false},
		{"http source", podWith("p", "ns", map[string]string{mirror.ConfigSourceAnnotationKey: mirror.HTTPSource}), true, false},
		{"an agent's own source", podWith("p", "ns", map[string]string{mirror.ConfigSourceAnnotationKey: "virtual"}), true, false},
		{"api source", podWith("p", "ns", map[string]string{mirror.ConfigSourceAnnotationKey: mirror.ApiserverSource}), false, false},
		{"mirror annotation with a hash", podWith("p", "ns", map[string]string{mirror.ConfigMirrorAnnotationKey: "abc"}), false, true},
		{"empty mirror annotation still marks a mirror", podWith("p", "ns", map[string]string{mirror.ConfigMirrorAnnotationKey: ""}), false, true},
		{"mirror copied from a file pod", podWith("p", "ns", map[string]string{
			mirror.ConfigSourceAnnotationKey: mirror.FileSource, mirror.ConfigMirrorAnnotationKey: "abc",
		}), true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.static, mirror.IsStaticPod(tc.pod), "IsStaticPod")
			assert.Equal(t, tc.mirror, mirror.IsMirrorPod(tc.pod), "IsMirrorPod")
		})
	}
}

func TestIsMirrorPodOf(t *testing.T) {
	static := podWith("etcd-node1", "kube-system", map[string]string{
		mirror.ConfigSourceAnnotationKey: mirror.FileSource,
		mirror.ConfigHashAnnotationKey:   "h1",
	})
	mirrorWith := func(name, namespace string, annotations map[string]string) *v1.Pod {
		return podWith(name, namespace, annotations)
	}
	tests := []struct {
		name   string
		mirror *v1.Pod
		pod    *v1.Pod
		want   bool
	}{
		{"current mirror", mirrorWith("etcd-node1", "kube-system", map[string]string{mirror.ConfigMirrorAnnotationKey: "h1"}), static, true},
		{"stale mirror with another hash", mirrorWith("etcd-node1", "kube-system", map[string]string{mirror.ConfigMirrorAnnotationKey: "h0"}), static, false},
		{"other name", mirrorWith("etcd-node2", "kube-system", map[string]string{mirror.ConfigMirrorAnnotationKey: "h1"}), static, false},
		{"other namespace", mirrorWith("etcd-node1", "default", map[string]string{mirror.ConfigMirrorAnnotationKey: "h1"}), static, false},
		{"not a mirror at all", mirrorWith("etcd-node1", "kube-system", map[string]string{"x": "h1"}), static, false},
		{"nil mirror", nil, static, false},
		{"nil pod", mirrorWith("etcd-node1", "kube-system", map[string]string{mirror.ConfigMirrorAnnotationKey: "h1"}), nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, mirror.IsMirrorPodOf(tc.mirror, tc.pod))
		})
	}
}
