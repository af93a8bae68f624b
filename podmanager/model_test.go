package podmanager_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podmanager"
)

// model is a deliberately naive store: the pods in the order they were last
// added or updated, searched linearly. It states the contract directly, so
// the Manager's indexes are checked against it after every step.
type model struct{ pods []*v1.Pod }

func (m *model) upsert(p *v1.Pod) {
	m.remove(p.UID)
	m.pods = append(m.pods, p)
}

func (m *model) remove(uid types.UID) {
	m.pods = slices.DeleteFunc(m.pods, func(q *v1.Pod) bool { return q.UID == uid })
}

// latest returns the pod of the wanted kind with that full name that was
// added or updated last.
func (m *model) latest(fullName string, wantMirror bool) *v1.Pod {
	for i := len(m.pods) - 1; i >= 0; i-- {
		p := m.pods[i]
		if mirror.IsMirrorPod(p) == wantMirror && mirror.PodFullName(p) == fullName {
			return p
		}
	}
	return nil
}

func (m *model) staticFor(fullName string) *v1.Pod {
	if p := m.latest(fullName, false); p != nil && mirror.IsStaticPod(p) {
		return p
	}
	return nil
}

// TestManagerMatchesModel applies seeded random sequences of adds, updates
// and removes, with full names deliberately shared between UIDs, and compares
// every answer of the Manager with the model. It is the D6 rules at scale:
// removal touches only the removed UID, and pairing needs a static pod.
func TestManagerMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			m := podmanager.New()
			var ref model
			var seen []*v1.Pod // pods ever used, so removals hit known UIDs

			randomPod := func() *v1.Pod {
				uid := types.UID(fmt.Sprint("u", rng.IntN(12)))
				name := fmt.Sprint("p", rng.IntN(3))
				switch rng.IntN(3) {
				case 0:
					return newStatic(uid, name)
				case 1:
					return newMirror(uid, name, "h")
				default:
					return newRegular(uid, name, "kube-system")
				}
			}

			for step := range 200 {
				switch op := rng.IntN(10); {
				case op < 6:
					p := randomPod()
					m.SetPod(p)
					ref.upsert(p)
					seen = append(seen, p)
				case op < 9 && len(seen) > 0:
					p := seen[rng.IntN(len(seen))]
					m.RemovePod(p)
					ref.remove(p.UID)
				default:
					keep := ref.pods[:0:0]
					for _, p := range ref.pods {
						if rng.IntN(2) == 0 {
							keep = append(keep, p)
						}
					}
					m.SetPods(keep)
					ref = model{}
					for _, p := range keep {
						ref.upsert(p)
					}
				}
				compare(t, step, m, &ref)
			}
		})
	}
}

func compare(t *testing.T, step int, m *podmanager.Manager, ref *model) {
	t.Helper()
	msg := fmt.Sprintf("after step %d", step)

	var wantPods, wantMirrors []types.UID
	wantPodToMirror := map[types.UID]types.UID{}
	wantMirrorToPod := map[types.UID]types.UID{}
	orphanSet := map[string]bool{}
	for _, p := range ref.pods {
		name := mirror.PodFullName(p)
		if mirror.IsMirrorPod(p) {
			wantMirrors = append(wantMirrors, p.UID)
			if s := ref.staticFor(name); s != nil {
				wantMirrorToPod[p.UID] = s.UID
				require.Equal(t, s.UID, m.TranslatePodUID(p.UID), msg)
				sp, ok := m.GetPodByMirrorPod(p)
				require.True(t, ok, msg)
				require.Same(t, s, sp, msg)
			} else {
				orphanSet[name] = true
				require.Equal(t, p.UID, m.TranslatePodUID(p.UID), msg)
			}
			continue
		}
		wantPods = append(wantPods, p.UID)
		got, ok := m.GetPodByUID(p.UID)
		require.True(t, ok, msg)
		require.Same(t, p, got, msg)
		require.Equal(t, p.UID, m.TranslatePodUID(p.UID), msg)

		byName, ok := m.GetPodByFullName(name)
		require.True(t, ok, msg)
		require.Same(t, ref.latest(name, false), byName, msg)

		wantMirror := (*v1.Pod)(nil)
		if mirror.IsStaticPod(p) {
			wantMirror = ref.latest(name, true)
			wantPodToMirror[p.UID] = ""
		}
		gotPod, gotMirror, wasMirror := m.GetPodAndMirrorPod(p)
		require.False(t, wasMirror, msg)
		require.Same(t, p, gotPod, msg)
		require.Same(t, wantMirror, gotMirror, msg)
	}
	// A static pod names the mirror its full name answers with, if that
	// mirror is paired with it.
	for mirrorUID, podUID := range wantMirrorToPod {
		for _, p := range ref.pods {
			if p.UID == mirrorUID && ref.latest(mirror.PodFullName(p), true) == p {
				wantPodToMirror[podUID] = mirrorUID
			}
		}
	}

	pods, mirrors, orphans := m.GetPodsAndMirrorPods()
	require.ElementsMatch(t, wantPods, uids(pods), msg)
	require.ElementsMatch(t, wantMirrors, uids(mirrors), msg)
	wantOrphans := make([]string, 0, len(orphanSet))
	for name := range orphanSet {
		wantOrphans = append(wantOrphans, name)
	}
	sort.Strings(wantOrphans)
	sort.Strings(orphans)
	require.ElementsMatch(t, wantOrphans, orphans, msg)

	podToMirror, mirrorToPod := m.GetUIDTranslations()
	require.Equal(t, wantPodToMirror, podToMirror, msg)
	require.Equal(t, wantMirrorToPod, mirrorToPod, msg)
}
