package podconfig_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/podkit/podkit/lifecycle/podconfig"
	"github.com/podkit/podkit/mirror"
)

// ops renders updates as "OP:uid,uid" strings.
func ops(updates []podconfig.PodUpdate) []string {
	var out []string
	for _, u := range updates {
		s := u.Op.String() + ":"
		for i, p := range u.Pods {
			if i > 0 {
				s += ","
			}
			s += string(p.UID)
		}
		out = append(out, s)
	}
	return out
}

func newConfig(t *testing.T) (*podconfig.Config, *events) {
	t.Helper()
	rec := &events{}
	c, err := podconfig.New(podconfig.Options{Recorder: rec, Clock: testingclock.NewFakeClock(epoch)})
	require.NoError(t, err)
	return c, rec
}

func TestConfigMerge(t *testing.T) {
	c, _ := newConfig(t)
	a, b, d := apiPod("a", "a", 0), apiPod("b", "b", 1), apiPod("d", "d", 2)

	// The first snapshot: ADD, with the source and first-seen stamps.
	ups, err := c.Merge("api", []*v1.Pod{a, b, d})
	require.NoError(t, err)
	require.Equal(t, []string{"ADD:a,b,d"}, ops(ups))
	added := ups[0].Pods[0]
	assert.Equal(t, "api", added.Annotations[mirror.ConfigSourceAnnotationKey])
	assert.Equal(t, epoch.Format(time.RFC3339Nano), added.Annotations[mirror.ConfigFirstSeenAnnotationKey])
	assert.Nil(t, a.Annotations, "the caller's pod is not modified")

	// The same snapshot again: nothing.
	ups, err = c.Merge("api", []*v1.Pod{a, b, d})
	require.NoError(t, err)
	assert.Empty(t, ups)

	// A of each kind of change, in the documented order.
	a2 := a.DeepCopy()
	a2.Spec.Containers[0].Image = "app:2"
	b2 := b.DeepCopy()
	b2.Status.Phase = v1.PodRunning
	d2 := d.DeepCopy()
	now := metav1.NewTime(epoch)
	d2.DeletionTimestamp = &now
	e := apiPod("e", "e", 3)
	ups, err = c.Merge("api", []*v1.Pod{e, a2, b2, d2})
	require.NoError(t, err)
	assert.Equal(t, []string{"ADD:e", "UPDATE:a", "DELETE:d", "RECONCILE:b"}, ops(ups))
	assert.Equal(t, "app:2", ups[1].Pods[0].Spec.Containers[0].Image)
	assert.Equal(t, epoch.Format(time.RFC3339Nano), ups[1].Pods[0].Annotations[mirror.ConfigFirstSeenAnnotationKey], "the first-seen time is kept")
	assert.Equal(t, v1.PodRunning, ups[3].Pods[0].Status.Phase)

	// Local annotations do not make an update; other annotations do.
	a3 := a2.DeepCopy()
	a3.Annotations = map[string]string{mirror.ConfigSourceAnnotationKey: "file", mirror.ConfigFirstSeenAnnotationKey: "whenever"}
	ups, err = c.Merge("api", []*v1.Pod{e, a3, b2, d2})
	require.NoError(t, err)
	assert.Empty(t, ups)
	a3.Annotations["team"] = "x"
	ups, err = c.Merge("api", []*v1.Pod{e, a3, b2, d2})
	require.NoError(t, err)
	assert.Equal(t, []string{"UPDATE:a"}, ops(ups))
	assert.Equal(t, "api", ups[0].Pods[0].Annotations[mirror.ConfigSourceAnnotationKey])

	// Missing pods are removed, sorted by full name.
	ups, err = c.Merge("api", []*v1.Pod{a3})
	require.NoError(t, err)
	assert.Equal(t, []string{"REMOVE:b,d,e"}, ops(ups))

	// Sources are independent; a first empty snapshot still says "ready".
	ups, err = c.Merge("file", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"ADD:"}, ops(ups))
	assert.Equal(t, "file", ups[0].Source)
	ups, err = c.Merge("file", nil)
	require.NoError(t, err)
	assert.Empty(t, ups)
}

func TestConfigMergeFirstSnapshotWithOnlyRemovesOrReconciles(t *testing.T) {
	c, _ := newConfig(t)
	// A first snapshot always carries an ADD, even when it adds nothing.
	ups, err := c.Merge("api", []*v1.Pod{})
	require.NoError(t, err)
	assert.Equal(t, []string{"ADD:"}, ops(ups))
}

func TestConfigMergeRejectsInvalidPods(t *testing.T) {
	c, rec := newConfig(t)
	noUID := apiPod("", "nouid", 0)
	dupName := apiPod("other", "a", 1)
	dupUID := apiPod("a", "b", 2)
	fakeMirror := apiPod("m", "m", 3)
	fakeMirror.Annotations = map[string]string{mirror.ConfigMirrorAnnotationKey: "h"}
	ups, err := c.Merge("file", []*v1.Pod{apiPod("a", "a", 0), nil, noUID, dupName, dupUID, fakeMirror})
	require.NoError(t, err)
	assert.Equal(t, []string{"ADD:a"}, ops(ups))
	assert.Equal(t, []string{
		"FailedValidation nouid_default",
		"FailedValidation a_default",
		"FailedValidation b_default",
		"FailedValidation m_default",
	}, rec.reasons())

	// From the API server, a mirror pod is fine.
	ups, err = c.Merge("api", []*v1.Pod{fakeMirror})
	require.NoError(t, err)
	assert.Equal(t, []string{"ADD:m"}, ops(ups))

	_, err = c.Merge("", nil)
	assert.ErrorContains(t, err, "podconfig: Config")
}

func TestConfigSetPods(t *testing.T) {
	c, err := podconfig.New(podconfig.Options{Buffer: 1})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.SetPods(ctx, "api", []*v1.Pod{apiPod("a", "a", 0)}))
	u := <-c.Updates()
	assert.Equal(t, podconfig.OpAdd, u.Op)
	assert.Equal(t, types.UID("a"), u.Pods[0].UID)

	// A full channel blocks until ctx ends.
	require.NoError(t, c.SetPods(ctx, "file", nil))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, c.SetPods(canceled, "other", nil), context.Canceled)

	assert.ErrorContains(t, c.SetPods(ctx, "", nil), "source name")
	_, err = podconfig.New(podconfig.Options{Buffer: -1})
	assert.ErrorContains(t, err, "podconfig: Options.Buffer")
}

func TestPodOperationString(t *testing.T) {
	assert.Equal(t, "ADD", podconfig.OpAdd.String())
	assert.Equal(t, "DELETE", podconfig.OpDelete.String())
	assert.Equal(t, "REMOVE", podconfig.OpRemove.String())
	assert.Equal(t, "UPDATE", podconfig.OpUpdate.String())
	assert.Equal(t, "RECONCILE", podconfig.OpReconcile.String())
	assert.Equal(t, "PodOperation(7)", podconfig.PodOperation(7).String())
	// The values are the kubelet's.
	assert.Equal(t, []int{0, 1, 2, 3, 4}, []int{int(podconfig.OpAdd), int(podconfig.OpDelete), int(podconfig.OpRemove), int(podconfig.OpUpdate), int(podconfig.OpReconcile)})
}
