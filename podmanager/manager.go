package podmanager

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
)

// Manager is the in-memory store of desired pods. It indexes non-mirror pods and
// mirror pods by UID and by full name, and derives the static/mirror pairing
// and the UID translation from those indexes, so they can never go stale.
//
// Create it with New. All methods are safe for concurrent use; none of them
// blocks on anything but the Manager's own lock, and none calls out to other
// code while holding it.
type Manager struct {
	mu sync.RWMutex
	// pods indexes the pods that are not mirror pods; mirrors indexes the
	// mirror pods. A UID is in at most one of them.
	pods, mirrors index
}

// index holds pods by UID and by full name.
//
// Invariant: every UID in byUID appears exactly once in byName, in the list
// under its pod's full name, and every UID in byName is in byUID; no list is
// empty. The last UID of a list is the pod added or updated most recently
// under that full name, the one full-name lookups answer with.
type index struct {
	byUID  map[types.UID]*v1.Pod
	byName map[string][]types.UID
}

func newIndex() index {
	return index{byUID: make(map[types.UID]*v1.Pod), byName: make(map[string][]types.UID)}
}

// upsert stores pod under its UID and moves it to the end of its full name's
// list, dropping the old full-name entry if the UID's full name changed.
func (ix *index) upsert(pod *v1.Pod) {
	if old, ok := ix.byUID[pod.UID]; ok {
		ix.unlink(mirror.PodFullName(old), pod.UID)
	}
	ix.byUID[pod.UID] = pod
	name := mirror.PodFullName(pod)
	ix.byName[name] = append(ix.byName[name], pod.UID)
}

// remove forgets uid and only uid: other pods under the same full name stay
// (decision D6).
func (ix *index) remove(uid types.UID) {
	old, ok := ix.byUID[uid]
	if !ok {
		return
	}
	delete(ix.byUID, uid)
	ix.unlink(mirror.PodFullName(old), uid)
}

func (ix *index) unlink(name string, uid types.UID) {
	uids := ix.byName[name]
	i := slices.Index(uids, uid)
	if i < 0 {
		return
	}
	uids = slices.Delete(uids, i, i+1)
	if len(uids) == 0 {
		delete(ix.byName, name)
		return
	}
	ix.byName[name] = uids
}

// byFullName returns the pod added or updated most recently under name.
func (ix *index) byFullName(name string) (*v1.Pod, bool) {
	uids := ix.byName[name]
	if len(uids) == 0 {
		return nil, false
	}
	return ix.byUID[uids[len(uids)-1]], true
}

func (ix *index) list() []*v1.Pod {
	out := make([]*v1.Pod, 0, len(ix.byUID))
	for _, p := range ix.byUID {
		out = append(out, p)
	}
	return out
}

// New returns an empty Manager.
func New() *Manager {
	return &Manager{pods: newIndex(), mirrors: newIndex()}
}

// SetPods replaces everything the Manager holds with pods (mirror pods
// included), as if it were emptied and each pod then passed to SetPod in
// order. Nil pods and pods without a UID are skipped. The slice is not kept.
func (m *Manager) SetPods(pods []*v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods, m.mirrors = newIndex(), newIndex()
	for _, p := range pods {
		m.upsertLocked(p)
	}
}

// SetPod records pod, keyed by its UID, replacing the pod stored with that
// UID, if any: a pod new to config and a changed pod are recorded alike.
// (The kubelet's pod manager has AddPod and UpdatePod for this, which do
// the same; podkit has one method, named apart from the pod workers'
// UpdatePod, which the sync loop calls beside it.) A mirror pod
// (mirror.IsMirrorPod) goes to the mirror indexes, any other pod to the
// pod indexes; a UID that moves from one kind to the other leaves the
// first. The pod becomes the answer of the full-name lookups for its full
// name. The Manager keeps the pointer and never modifies the pod; the caller
// must not modify it afterwards either. A nil pod or one without a UID is
// ignored: there is nothing to key it by.
func (m *Manager) SetPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.upsertLocked(pod)
}

func (m *Manager) upsertLocked(pod *v1.Pod) {
	if pod == nil || pod.UID == "" {
		return
	}
	if mirror.IsMirrorPod(pod) {
		m.pods.remove(pod.UID)
		m.mirrors.upsert(pod)
		return
	}
	m.mirrors.remove(pod.UID)
	m.pods.upsert(pod)
}

// RemovePod forgets the pod, mirror or not, stored under pod's UID, and only
// it (decision D6): if another pod has the same full name, it stays and the
// full-name lookups answer with it. Removing a static pod or its mirror ends
// their pairing and UID translation; the other side stays stored, and a mirror
// left without its static pod is an orphan. Only the UID of pod is read; an
// unknown UID, a nil pod or an empty UID does nothing.
func (m *Manager) RemovePod(pod *v1.Pod) {
	if pod == nil || pod.UID == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods.remove(pod.UID)
	m.mirrors.remove(pod.UID)
}

// GetPods returns every pod that is not a mirror pod, in no particular order.
// The slice is new and the caller's; the pods are the stored pointers and
// must not be modified.
func (m *Manager) GetPods() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pods.list()
}

// GetPodsAndMirrorPods returns, from one consistent state, every pod that is
// not a mirror pod, every mirror pod, and the full names of orphaned mirror
// pods: those whose full name has no static pod in the Manager (a non-static
// pod with that full name does not count). Each is in no particular order;
// the slices are new and the caller's (orphanedMirrorPodFullNames is nil when
// there are none); the pods must not be modified.
func (m *Manager) GetPodsAndMirrorPods() (pods, mirrorPods []*v1.Pod, orphanedMirrorPodFullNames []string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for name := range m.mirrors.byName {
		if _, ok := m.staticPodLocked(name); !ok {
			orphanedMirrorPodFullNames = append(orphanedMirrorPodFullNames, name)
		}
	}
	return m.pods.list(), m.mirrors.list(), orphanedMirrorPodFullNames
}

// GetStaticPodToMirrorPodMap returns every static pod in the Manager mapped to
// its mirror pod, or to nil when it has none (the agent runs without an API
// server, or has not created the mirror yet). The map is new and the
// caller's; keys and values are the stored pods and must not be modified.
func (m *Manager) GetStaticPodToMirrorPodMap() map[*v1.Pod]*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[*v1.Pod]*v1.Pod)
	for _, p := range m.pods.byUID {
		if mirror.IsStaticPod(p) {
			out[p], _ = m.mirrors.byFullName(mirror.PodFullName(p))
		}
	}
	return out
}

// GetPodByUID returns the pod with that UID if it is not a mirror pod. Use
// TranslatePodUID first for a UID that may be a mirror pod's.
func (m *Manager) GetPodByUID(uid types.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.pods.byUID[uid]
	return p, ok
}

// GetPodByName returns the non-mirror pod with that namespace and name (note
// the order of the arguments, namespace first).
func (m *Manager) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	return m.GetPodByFullName(mirror.BuildPodFullName(name, namespace))
}

// GetPodByFullName returns the non-mirror pod with that full name
// ("name_namespace"). If several pods share it, the one added or updated
// most recently is returned.
func (m *Manager) GetPodByFullName(podFullName string) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pods.byFullName(podFullName)
}

// GetPodByMirrorPod returns the static pod that mirrorPod stands for: the
// stored pod with mirrorPod's full name, if it is static. A pod that is not a
// mirror pod, or nil, has none. The hash is not compared (see
// mirror.IsMirrorPodOf).
func (m *Manager) GetPodByMirrorPod(mirrorPod *v1.Pod) (*v1.Pod, bool) {
	if !mirror.IsMirrorPod(mirrorPod) {
		return nil, false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.staticPodLocked(mirror.PodFullName(mirrorPod))
}

// GetMirrorPodByPod returns the stored mirror pod with pod's full name, if pod
// is a static pod that is not itself a mirror. Other pods, and nil, have
// none. The hash is not compared (see mirror.IsMirrorPodOf).
func (m *Manager) GetMirrorPodByPod(pod *v1.Pod) (*v1.Pod, bool) {
	if !isStaticNonMirror(pod) {
		return nil, false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mirrors.byFullName(mirror.PodFullName(pod))
}

// GetPodAndMirrorPod completes a static/mirror pair from either side. Given a
// mirror pod it returns (its static pod or nil, the mirror pod, true); given
// any other pod it returns (that pod, its mirror pod or nil, false); the
// mirror is found only for a static pod. The argument need not be stored;
// nil gives (nil, nil, false).
func (m *Manager) GetPodAndMirrorPod(pod *v1.Pod) (p, mirrorPod *v1.Pod, wasMirror bool) {
	if pod == nil {
		return nil, nil, false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	name := mirror.PodFullName(pod)
	if mirror.IsMirrorPod(pod) {
		p, _ = m.staticPodLocked(name)
		return p, pod, true
	}
	if mirror.IsStaticPod(pod) {
		mirrorPod, _ = m.mirrors.byFullName(name)
	}
	return pod, mirrorPod, false
}

// TranslatePodUID returns the UID of the static pod paired with the mirror
// pod whose UID is uid. Any other UID (a static or regular pod's, an unknown
// one, a mirror's without a static pod) is returned unchanged; "" stays "".
// Callers use it on UIDs from outside (users, the API server), which name a
// static pod by its mirror's UID.
func (m *Manager) TranslatePodUID(uid types.UID) types.UID {
	if uid == "" {
		return ""
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if p, ok := m.translateLocked(uid); ok {
		return p
	}
	return uid
}

// GetUIDTranslations returns both directions of the UID translation, in new
// maps that belong to the caller. podToMirror has every static pod, mapped to
// the UID of its mirror pod, or to "" when it has none. mirrorToPod has every
// mirror pod that has a static pod, mapped to that pod's UID. Translations
// exist only between a static pod and its mirror (decision D6).
func (m *Manager) GetUIDTranslations() (podToMirror, mirrorToPod map[types.UID]types.UID) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	podToMirror = make(map[types.UID]types.UID)
	mirrorToPod = make(map[types.UID]types.UID)
	for uid, p := range m.pods.byUID {
		if mirror.IsStaticPod(p) {
			podToMirror[uid] = ""
		}
	}
	for uid := range m.mirrors.byUID {
		podUID, ok := m.translateLocked(uid)
		if !ok {
			continue
		}
		mirrorToPod[uid] = podUID
		// When two mirrors share a full name, the static pod names the
		// one the full-name lookup answers with.
		if current, _ := m.mirrors.byFullName(mirror.PodFullName(m.mirrors.byUID[uid])); current.UID == uid {
			podToMirror[podUID] = uid
		}
	}
	return podToMirror, mirrorToPod
}

// translateLocked returns the UID of the static pod paired with the mirror
// pod mirrorUID. m.mu must be held.
func (m *Manager) translateLocked(mirrorUID types.UID) (types.UID, bool) {
	mp, ok := m.mirrors.byUID[mirrorUID]
	if !ok {
		return "", false
	}
	p, ok := m.staticPodLocked(mirror.PodFullName(mp))
	if !ok {
		return "", false
	}
	return p.UID, true
}

// staticPodLocked returns the non-mirror pod with full name name if it is a
// static pod. m.mu must be held.
func (m *Manager) staticPodLocked(name string) (*v1.Pod, bool) {
	p, ok := m.pods.byFullName(name)
	if !ok || !mirror.IsStaticPod(p) {
		return nil, false
	}
	return p, true
}

func isStaticNonMirror(pod *v1.Pod) bool {
	return mirror.IsStaticPod(pod) && !mirror.IsMirrorPod(pod)
}
