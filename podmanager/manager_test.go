package podmanager_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podmanager"
)

// The cast of most tests: a static pod from a manifest, its mirror pod from
// the API server (same full name, its own UID), and an ordinary API pod.
func newStatic(uid types.UID, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		UID: uid, Name: name, Namespace: "kube-system",
		Annotations: map[string]string{
			mirror.ConfigSourceAnnotationKey: mirror.FileSource,
			mirror.ConfigHashAnnotationKey:   string(uid),
		},
	}}
}

func newMirror(uid types.UID, name, hash string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		UID: uid, Name: name, Namespace: "kube-system",
		Annotations: map[string]string{
			mirror.ConfigSourceAnnotationKey: mirror.ApiserverSource,
			mirror.ConfigMirrorAnnotationKey: hash,
		},
	}}
}

func newRegular(uid types.UID, name, namespace string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		UID: uid, Name: name, Namespace: namespace,
		Annotations: map[string]string{mirror.ConfigSourceAnnotationKey: mirror.ApiserverSource},
	}}
}

type cast struct{ static, mirror, regular *v1.Pod }

func newCast() cast {
	return cast{
		static:  newStatic("static-uid", "etcd-node-a"),
		mirror:  newMirror("mirror-uid", "etcd-node-a", "static-uid"),
		regular: newRegular("regular-uid", "web", "default"),
	}
}

func (c cast) all() []*v1.Pod { return []*v1.Pod{c.mirror, c.static, c.regular} }

func uids(pods []*v1.Pod) []types.UID {
	out := make([]types.UID, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.UID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func TestSetPod(t *testing.T) {
	c := newCast()
	tests := []struct {
		name     string
		pod      *v1.Pod
		isMirror bool
	}{
		{"mirror pod", c.mirror, true},
		{"static pod", c.static, false},
		{"regular pod", c.regular, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := podmanager.New()
			check := func(want *v1.Pod) {
				t.Helper()
				pods, mirrors, _ := m.GetPodsAndMirrorPods()
				byUID, okUID := m.GetPodByUID(want.UID)
				byName, okName := m.GetPodByFullName(mirror.PodFullName(want))
				if tc.isMirror {
					assert.Equal(t, []*v1.Pod{want}, mirrors)
					assert.Empty(t, pods)
					assert.False(t, okUID, "mirror pods are not found by UID")
					assert.False(t, okName, "mirror pods are not found by full name")
					return
				}
				assert.Equal(t, []*v1.Pod{want}, pods)
				assert.Empty(t, mirrors)
				assert.True(t, okUID)
				assert.Same(t, want, byUID)
				assert.True(t, okName)
				assert.Same(t, want, byName)
			}

			m.SetPod(tc.pod)
			check(tc.pod)

			updated := tc.pod.DeepCopy()
			updated.Labels = map[string]string{"generation": "2"}
			m.SetPod(updated)
			check(updated)
		})
	}
}

func TestGetSetPods(t *testing.T) {
	c := newCast()
	tests := []struct {
		name       string
		give       *v1.Pod // the pod the questions are asked about
		wantPod    *v1.Pod // its non-mirror side
		wantMirror *v1.Pod // its mirror side
		wantUID    types.UID
		isMirror   bool
	}{
		{name: "regular pod", give: c.regular, wantPod: c.regular, wantUID: "regular-uid"},
		{name: "static pod", give: c.static, wantPod: c.static, wantMirror: c.mirror, wantUID: "static-uid"},
		{name: "mirror pod", give: c.mirror, wantPod: c.static, wantMirror: c.mirror, wantUID: "static-uid", isMirror: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := podmanager.New()
			m.SetPods(c.all())

			assert.Equal(t, []types.UID{"regular-uid", "static-uid"}, uids(m.GetPods()))
			assert.Equal(t, tc.wantUID, m.TranslatePodUID(tc.give.UID))

			p, ok := m.GetPodByFullName(mirror.PodFullName(tc.give))
			assert.True(t, ok)
			assert.Same(t, tc.wantPod, p)
			p, ok = m.GetPodByName(tc.give.Namespace, tc.give.Name)
			assert.True(t, ok)
			assert.Same(t, tc.wantPod, p)
			p, ok = m.GetPodByUID(tc.wantUID)
			assert.True(t, ok)
			assert.Same(t, tc.wantPod, p)

			podToMirror, mirrorToPod := m.GetUIDTranslations()
			assert.Equal(t, map[types.UID]types.UID{"static-uid": "mirror-uid"}, podToMirror)
			assert.Equal(t, map[types.UID]types.UID{"mirror-uid": "static-uid"}, mirrorToPod)

			gotPod, gotMirror, wasMirror := m.GetPodAndMirrorPod(tc.give)
			assert.Same(t, tc.wantPod, gotPod)
			assert.Equal(t, tc.wantMirror, gotMirror)
			assert.Equal(t, tc.isMirror, wasMirror)

			mp, ok := m.GetMirrorPodByPod(tc.give)
			if tc.isMirror || tc.wantMirror == nil {
				assert.False(t, ok, "only a static pod has a mirror")
				assert.Nil(t, mp)
			} else {
				assert.True(t, ok)
				assert.Same(t, tc.wantMirror, mp)
			}

			sp, ok := m.GetPodByMirrorPod(tc.give)
			assert.Equal(t, tc.isMirror, ok, "only a mirror pod has a static pod")
			if tc.isMirror {
				assert.Same(t, c.static, sp)
			}

			assert.Equal(t, tc.isMirror, mirror.IsMirrorPodOf(tc.give, c.static))
		})
	}
}

func TestRemovePod(t *testing.T) {
	c := newCast()
	tests := []struct {
		name        string
		remove      *v1.Pod
		wantPods    []types.UID
		wantMirrors []types.UID
		wantOrphans []string
	}{
		{"mirror pod", c.mirror, []types.UID{"regular-uid", "static-uid"}, []types.UID{}, nil},
		{"static pod leaves an orphaned mirror", c.static, []types.UID{"regular-uid"}, []types.UID{"mirror-uid"}, []string{"etcd-node-a_kube-system"}},
		{"regular pod", c.regular, []types.UID{"static-uid"}, []types.UID{"mirror-uid"}, nil},
		{"unknown pod", newRegular("unknown", "web", "default"), []types.UID{"regular-uid", "static-uid"}, []types.UID{"mirror-uid"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := podmanager.New()
			m.SetPods(c.all())
			m.RemovePod(tc.remove)

			pods, mirrors, orphans := m.GetPodsAndMirrorPods()
			assert.Equal(t, uids(m.GetPods()), uids(pods), "GetPods and GetPodsAndMirrorPods agree")
			assert.Equal(t, tc.wantPods, uids(pods))
			assert.Equal(t, tc.wantMirrors, uids(mirrors))
			assert.Equal(t, tc.wantOrphans, orphans)
		})
	}
}

func TestGetStaticPodToMirrorPodMap(t *testing.T) {
	c := newCast()
	lonely := newStatic("lonely-uid", "scheduler-node-a")
	m := podmanager.New()
	m.SetPods(append(c.all(), lonely))

	got := m.GetStaticPodToMirrorPodMap()
	assert.Len(t, got, 2, "static pods only")
	assert.Same(t, c.mirror, got[c.static])
	mp, ok := got[lonely]
	assert.True(t, ok, "a static pod without a mirror maps to nil")
	assert.Nil(t, mp)
}

// D6: when a static pod's manifest changes, the new version (new UID, same
// full name) may be added before the old one is removed. Removing the old one
// must not take the new one's full-name entry or translation with it.
func TestRemovePodD6KeepsEntriesOfOtherUIDs(t *testing.T) {
	old := newStatic("etcd-v1", "etcd-node-a")
	current := newStatic("etcd-v2", "etcd-node-a")
	mirrorPod := newMirror("mirror-uid", "etcd-node-a", "etcd-v2")

	t.Run("removing the older pod keeps the newer one", func(t *testing.T) {
		m := podmanager.New()
		m.SetPods([]*v1.Pod{old, mirrorPod, current})
		m.RemovePod(old)

		p, ok := m.GetPodByFullName("etcd-node-a_kube-system")
		require.True(t, ok, "the kubelet loses the full-name entry here")
		assert.Same(t, current, p)
		assert.Equal(t, types.UID("etcd-v2"), m.TranslatePodUID("mirror-uid"))
		_, _, orphans := m.GetPodsAndMirrorPods()
		assert.Empty(t, orphans, "the mirror still has its static pod")
	})

	t.Run("removing the newer pod falls back to the older one", func(t *testing.T) {
		m := podmanager.New()
		m.SetPods([]*v1.Pod{old, mirrorPod, current})
		m.RemovePod(current)

		p, ok := m.GetPodByFullName("etcd-node-a_kube-system")
		require.True(t, ok)
		assert.Same(t, old, p)
		assert.Equal(t, types.UID("etcd-v1"), m.TranslatePodUID("mirror-uid"))
	})

	t.Run("the last added or updated pod answers for the full name", func(t *testing.T) {
		m := podmanager.New()
		m.SetPods([]*v1.Pod{old, current})
		p, _ := m.GetPodByFullName("etcd-node-a_kube-system")
		assert.Same(t, current, p)
		m.SetPod(old)
		p, _ = m.GetPodByFullName("etcd-node-a_kube-system")
		assert.Same(t, old, p)
	})

	t.Run("a stale copy of a mirror removes only its own UID", func(t *testing.T) {
		recreated := newMirror("mirror-uid-2", "etcd-node-a", "etcd-v2")
		m := podmanager.New()
		m.SetPods([]*v1.Pod{current, mirrorPod, recreated})
		m.RemovePod(mirrorPod)

		got, ok := m.GetMirrorPodByPod(current)
		require.True(t, ok)
		assert.Same(t, recreated, got)
		podToMirror, mirrorToPod := m.GetUIDTranslations()
		assert.Equal(t, map[types.UID]types.UID{"etcd-v2": "mirror-uid-2"}, podToMirror)
		assert.Equal(t, map[types.UID]types.UID{"mirror-uid-2": "etcd-v2"}, mirrorToPod)
	})
}

// D6: a UID translation exists only between a static pod and its mirror, and
// goes away with either of them.
func TestUIDTranslationD6OnlyBetweenAStaticPodAndItsMirror(t *testing.T) {
	c := newCast()

	t.Run("a non-static pod is never paired", func(t *testing.T) {
		impostor := newRegular("api-uid", c.mirror.Name, c.mirror.Namespace)
		m := podmanager.New()
		m.SetPods([]*v1.Pod{impostor, c.mirror})

		assert.Equal(t, types.UID("mirror-uid"), m.TranslatePodUID("mirror-uid"))
		podToMirror, mirrorToPod := m.GetUIDTranslations()
		assert.Empty(t, podToMirror)
		assert.Empty(t, mirrorToPod)
		_, ok := m.GetPodByMirrorPod(c.mirror)
		assert.False(t, ok)
		_, ok = m.GetMirrorPodByPod(impostor)
		assert.False(t, ok)
		p, mp, _ := m.GetPodAndMirrorPod(impostor)
		assert.Same(t, impostor, p)
		assert.Nil(t, mp)
		_, _, orphans := m.GetPodsAndMirrorPods()
		assert.Equal(t, []string{"etcd-node-a_kube-system"}, orphans, "the mirror has no static pod")
	})

	t.Run("it goes with the static pod and comes back with it", func(t *testing.T) {
		m := podmanager.New()
		m.SetPods(c.all())
		m.RemovePod(c.static)
		assert.Equal(t, types.UID("mirror-uid"), m.TranslatePodUID("mirror-uid"), "the kubelet still translates here")
		podToMirror, mirrorToPod := m.GetUIDTranslations()
		assert.Empty(t, podToMirror)
		assert.Empty(t, mirrorToPod)

		m.SetPod(c.static)
		assert.Equal(t, types.UID("static-uid"), m.TranslatePodUID("mirror-uid"))
	})

	t.Run("it goes with the mirror pod", func(t *testing.T) {
		m := podmanager.New()
		m.SetPods(c.all())
		m.RemovePod(c.mirror)
		assert.Equal(t, types.UID("mirror-uid"), m.TranslatePodUID("mirror-uid"))
		podToMirror, mirrorToPod := m.GetUIDTranslations()
		assert.Equal(t, map[types.UID]types.UID{"static-uid": ""}, podToMirror, "a static pod without a mirror maps to \"\"")
		assert.Empty(t, mirrorToPod)
	})

	t.Run("the order of arrival does not matter", func(t *testing.T) {
		for _, order := range [][]*v1.Pod{{c.static, c.mirror}, {c.mirror, c.static}} {
			m := podmanager.New()
			for _, p := range order {
				m.SetPod(p)
			}
			assert.Equal(t, types.UID("static-uid"), m.TranslatePodUID("mirror-uid"))
		}
	})
}

func TestTranslatePodUID(t *testing.T) {
	m := podmanager.New()
	m.SetPods(newCast().all())
	tests := map[types.UID]types.UID{
		"":            "",
		"mirror-uid":  "static-uid",
		"static-uid":  "static-uid",
		"regular-uid": "regular-uid",
		"unknown":     "unknown",
	}
	for give, want := range tests {
		assert.Equal(t, want, m.TranslatePodUID(give), "TranslatePodUID(%q)", give)
	}
}

func TestSetPodKeepsTheIndexesConsistent(t *testing.T) {
	t.Run("a UID whose full name changes leaves its old name", func(t *testing.T) {
		m := podmanager.New()
		m.SetPod(newRegular("u1", "old-name", "default"))
		m.SetPod(newRegular("u1", "new-name", "default"))
		_, ok := m.GetPodByName("default", "old-name")
		assert.False(t, ok)
		_, ok = m.GetPodByName("default", "new-name")
		assert.True(t, ok)
		assert.Len(t, m.GetPods(), 1)
	})

	t.Run("a UID that turns into a mirror leaves the pod indexes", func(t *testing.T) {
		m := podmanager.New()
		m.SetPod(newStatic("u1", "etcd-node-a"))
		m.SetPod(newMirror("u1", "etcd-node-a", "h"))
		pods, mirrors, _ := m.GetPodsAndMirrorPods()
		assert.Empty(t, pods)
		assert.Equal(t, []types.UID{"u1"}, uids(mirrors))
		m.RemovePod(newStatic("u1", "etcd-node-a"))
		pods, mirrors, _ = m.GetPodsAndMirrorPods()
		assert.Empty(t, pods)
		assert.Empty(t, mirrors, "removal is by UID, whatever the kind of the argument")
	})
}

func TestBadInputIsIgnored(t *testing.T) {
	m := podmanager.New()
	m.SetPods([]*v1.Pod{nil, newRegular("", "no-uid", "default"), newRegular("u1", "web", "default")})
	m.SetPod(nil)
	m.SetPod(newRegular("", "no-uid-2", "default"))
	m.RemovePod(nil)
	m.RemovePod(&v1.Pod{})

	assert.Equal(t, []types.UID{"u1"}, uids(m.GetPods()))
	_, ok := m.GetPodByName("default", "no-uid")
	assert.False(t, ok)
	p, mp, wasMirror := m.GetPodAndMirrorPod(nil)
	assert.Nil(t, p)
	assert.Nil(t, mp)
	assert.False(t, wasMirror)
	_, ok = m.GetMirrorPodByPod(nil)
	assert.False(t, ok)
	_, ok = m.GetPodByMirrorPod(nil)
	assert.False(t, ok)
}

func TestReturnedValuesAreTheCallersAndPodsAreNotModified(t *testing.T) {
	c := newCast()
	before := []*v1.Pod{c.mirror.DeepCopy(), c.static.DeepCopy(), c.regular.DeepCopy()}
	m := podmanager.New()
	m.SetPods(c.all())

	pods := m.GetPods()
	pods[0] = nil
	all, mirrors, _ := m.GetPodsAndMirrorPods()
	all[0], mirrors[0] = nil, nil
	podToMirror, mirrorToPod := m.GetUIDTranslations()
	podToMirror["x"], mirrorToPod["y"] = "x", "y"
	delete(podToMirror, "static-uid")
	staticToMirror := m.GetStaticPodToMirrorPodMap()
	delete(staticToMirror, c.static)

	assert.Len(t, m.GetPods(), 2)
	assert.NotContains(t, m.GetPods(), (*v1.Pod)(nil))
	podToMirror, mirrorToPod = m.GetUIDTranslations()
	assert.Equal(t, map[types.UID]types.UID{"static-uid": "mirror-uid"}, podToMirror)
	assert.Equal(t, map[types.UID]types.UID{"mirror-uid": "static-uid"}, mirrorToPod)
	assert.Len(t, m.GetStaticPodToMirrorPodMap(), 1)

	m.RemovePod(c.static)
	m.RemovePod(c.mirror)
	m.SetPods(nil)
	assert.Equal(t, before, []*v1.Pod{c.mirror, c.static, c.regular}, "the store never writes to a pod")
}

func TestConcurrentReadersAndWriters(t *testing.T) {
	m := podmanager.New()
	const writers, readers, rounds = 4, 4, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				name := fmt.Sprintf("pod-%d", r%10)
				static := newStatic(types.UID(fmt.Sprintf("s-%d-%d", w, r%10)), name)
				mirrorPod := newMirror(types.UID(fmt.Sprintf("m-%d-%d", w, r%10)), name, string(static.UID))
				m.SetPod(static)
				m.SetPod(mirrorPod)
				if r%3 == 0 {
					m.RemovePod(static)
				}
				if r%5 == 0 {
					m.RemovePod(mirrorPod)
				}
				if r%50 == 0 {
					m.SetPods(nil)
				}
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for r := range rounds {
				name := fmt.Sprintf("pod-%d", r%10)
				for _, p := range m.GetPods() {
					m.GetPodAndMirrorPod(p)
					m.GetMirrorPodByPod(p)
				}
				_, mirrors, _ := m.GetPodsAndMirrorPods()
				for _, mp := range mirrors {
					m.TranslatePodUID(mp.UID)
					m.GetPodByMirrorPod(mp)
				}
				m.GetPodByName("kube-system", name)
				m.GetUIDTranslations()
				m.GetStaticPodToMirrorPodMap()
			}
		})
	}
	wg.Wait()

	// Whatever interleaving happened, the answers agree with each other.
	pods, mirrors, orphans := m.GetPodsAndMirrorPods()
	_, mirrorToPod := m.GetUIDTranslations()
	assert.Len(t, mirrorToPod, len(mirrors)-countOrphanedMirrors(mirrors, orphans))
	for _, p := range pods {
		got, ok := m.GetPodByUID(p.UID)
		assert.True(t, ok)
		assert.Same(t, p, got)
	}
}

func countOrphanedMirrors(mirrors []*v1.Pod, orphans []string) int {
	isOrphan := make(map[string]bool, len(orphans))
	for _, o := range orphans {
		isOrphan[o] = true
	}
	n := 0
	for _, mp := range mirrors {
		if isOrphan[mirror.PodFullName(mp)] {
			n++
		}
	}
	return n
}
