package mirror_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
)

func manifestPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "etcd",
			Annotations: map[string]string{"team": "storage"},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6"}},
			Tolerations: []v1.Toleration{
				{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "storage", Effect: v1.TaintEffectNoSchedule},
			},
		},
	}
}

func TestPrepareStaticPodAppliesTheDefaults(t *testing.T) {
	pod := manifestPod()
	original := pod.DeepCopy()
	shallow := *pod // shares the annotation map and toleration slice with pod

	require.NoError(t, mirror.PrepareStaticPod(pod, "Node-A", mirror.FileSource))

	assert.Len(t, string(pod.UID), 32, "a hex FNV-128a sum")
	assert.Equal(t, "etcd-node-a", pod.Name, "the node name is appended, lowercased")
	assert.Equal(t, metav1.NamespaceDefault, pod.Namespace)
	assert.Equal(t, "Node-A", pod.Spec.NodeName)
	assert.Equal(t, map[string]string{
		"team":                           "storage",
		mirror.ConfigHashAnnotationKey:   string(pod.UID),
		mirror.ConfigSourceAnnotationKey: mirror.FileSource,
	}, pod.Annotations)
	assert.Equal(t, []v1.Toleration{
		original.Spec.Tolerations[0],
		{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	}, pod.Spec.Tolerations)
	assert.Equal(t, v1.PodPending, pod.Status.Phase)
	assert.True(t, mirror.IsStaticPod(pod))

	assert.Equal(t, original.Annotations, shallow.Annotations, "the caller's old map is not written to")
	assert.Equal(t, original.Spec.Tolerations, shallow.Spec.Tolerations, "the caller's old slice is not written to")
}

func TestPrepareStaticPodUID(t *testing.T) {
	prepared := func(t *testing.T, pod *v1.Pod, node, source string) *v1.Pod {
		t.Helper()
		require.NoError(t, mirror.PrepareStaticPod(pod, node, source))
		return pod
	}
	base := prepared(t, manifestPod(), "node-a", mirror.FileSource)

	t.Run("the same manifest, node and source give the same UID", func(t *testing.T) {
		assert.Equal(t, base.UID, prepared(t, manifestPod(), "node-a", mirror.FileSource).UID)
	})
	t.Run("another node gives another UID", func(t *testing.T) {
		assert.NotEqual(t, base.UID, prepared(t, manifestPod(), "node-b", mirror.FileSource).UID)
	})
	t.Run("another source gives another UID", func(t *testing.T) {
		assert.NotEqual(t, base.UID, prepared(t, manifestPod(), "node-a", mirror.HTTPSource).UID)
	})
	t.Run("a changed manifest gives another UID", func(t *testing.T) {
		changed := manifestPod()
		changed.Spec.Containers[0].Image = "registry.k8s.io/etcd:3.7"
		assert.NotEqual(t, base.UID, prepared(t, changed, "node-a", mirror.FileSource).UID)
	})
	t.Run("a UID in the manifest is kept and becomes the hash", func(t *testing.T) {
		fixed := manifestPod()
		fixed.UID = types.UID("fixed-uid")
		fixed = prepared(t, fixed, "node-a", mirror.FileSource)
		assert.Equal(t, types.UID("fixed-uid"), fixed.UID)
		assert.Equal(t, "fixed-uid", fixed.Annotations[mirror.ConfigHashAnnotationKey])
	})
}

func TestPrepareStaticPodTolerations(t *testing.T) {
	tolerateAll := v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	seconds := int64(300)
	tests := []struct {
		name   string
		source string
		given  []v1.Toleration
		want   []v1.Toleration
	}{
		{"file pods tolerate every NoExecute taint", mirror.FileSource, nil, []v1.Toleration{tolerateAll}},
		{"an existing limited one is replaced, not doubled", mirror.FileSource,
			[]v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &seconds}},
			[]v1.Toleration{tolerateAll}},
		{"http pods get none", mirror.HTTPSource, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := manifestPod()
			pod.Spec.Tolerations = tc.given
			require.NoError(t, mirror.PrepareStaticPod(pod, "node-a", tc.source))
			assert.Equal(t, tc.want, pod.Spec.Tolerations)
		})
	}
}

func TestPrepareStaticPodKeepsANamespace(t *testing.T) {
	pod := manifestPod()
	pod.Namespace = "kube-system"
	require.NoError(t, mirror.PrepareStaticPod(pod, "node-a", mirror.FileSource))
	assert.Equal(t, "kube-system", pod.Namespace)
}

func TestPrepareStaticPodRejectsBadInput(t *testing.T) {
	named := func(name, namespace string) *v1.Pod {
		p := manifestPod()
		p.Name, p.Namespace = name, namespace
		return p
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		node     string
		source   string
		isStatic bool // the error wraps ErrNotStaticPod
	}{
		{"nil pod", nil, "node-a", mirror.FileSource, false},
		{"no name", named("", ""), "node-a", mirror.FileSource, false},
		{"no node name", named("etcd", ""), "", mirror.FileSource, false},
		{"underscore in the name", named("etc_d", ""), "node-a", mirror.FileSource, false},
		{"underscore in the namespace", named("etcd", "kube_system"), "node-a", mirror.FileSource, false},
		{"empty source", named("etcd", ""), "node-a", "", true},
		{"api source", named("etcd", ""), "node-a", mirror.ApiserverSource, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before *v1.Pod
			if tc.pod != nil {
				before = tc.pod.DeepCopy()
			}
			err := mirror.PrepareStaticPod(tc.pod, tc.node, tc.source)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "mirror: ")
			if tc.isStatic {
				assert.ErrorIs(t, err, mirror.ErrNotStaticPod)
			}
			assert.Equal(t, before, tc.pod, "a refused pod is left unchanged")
		})
	}
}
