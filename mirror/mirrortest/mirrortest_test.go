package mirrortest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/mirror/mirrortest"
)

func staticPod(name, hash string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "ns", UID: types.UID("static-" + name),
		Annotations: map[string]string{
			mirror.ConfigSourceAnnotationKey: mirror.FileSource,
			mirror.ConfigHashAnnotationKey:   hash,
		},
	}}
}

func TestFakeClientKeepsMirrors(t *testing.T) {
	ctx := context.Background()
	f := mirrortest.NewFakeClient()
	pod := staticPod("etcd", "h1")

	require.NoError(t, f.CreateMirrorPod(ctx, pod))
	require.NoError(t, f.CreateMirrorPod(ctx, pod), "same hash again is success (D5)")
	assert.Equal(t, []string{"etcd_ns"}, f.MirrorPodNames())
	m, ok := f.MirrorPod("etcd_ns")
	require.True(t, ok)
	assert.True(t, mirror.IsMirrorPodOf(m, pod))
	_, isMirror := pod.Annotations[mirror.ConfigMirrorAnnotationKey]
	assert.False(t, isMirror, "the given pod is not modified")

	err := f.CreateMirrorPod(ctx, staticPod("etcd", "h2"))
	require.ErrorIs(t, err, mirror.ErrHashMismatch, "another hash is refused, as by the real client (D5)")
	assert.ErrorContains(t, err, `"h1"`)
	assert.ErrorContains(t, err, `"h2"`)

	deleted, err := f.DeleteMirrorPod(ctx, "etcd_ns", ptr.To(types.UID("any")))
	require.NoError(t, err)
	assert.False(t, deleted, "a uid that is not the mirror's is a failed precondition")
	require.NotEqual(t, pod.UID, m.UID, "the mirror has a UID of its own")
	deleted, err = f.DeleteMirrorPod(ctx, "etcd_ns", ptr.To(m.UID))
	require.NoError(t, err)
	assert.True(t, deleted)
	deleted, err = f.DeleteMirrorPod(ctx, "etcd_ns", nil)
	require.NoError(t, err)
	assert.False(t, deleted, "already gone")
	assert.Empty(t, f.MirrorPodNames())

	creates := f.Creates()
	require.Len(t, creates, 3)
	assert.Equal(t, "h2", creates[2].Annotations[mirror.ConfigHashAnnotationKey])
	assert.Equal(t, []mirrortest.DeleteCall{
		{FullName: "etcd_ns", UID: ptr.To(types.UID("any"))},
		{FullName: "etcd_ns", UID: ptr.To(types.UID("mirror-1"))},
		{FullName: "etcd_ns"},
	}, f.Deletes())
}

func TestFakeClientRefusesWhatTheClientRefuses(t *testing.T) {
	ctx := context.Background()
	var f mirrortest.FakeClient // the zero value is ready

	regular := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u"}}
	assert.ErrorIs(t, f.CreateMirrorPod(ctx, regular), mirror.ErrNotStaticPod)
	assert.ErrorIs(t, f.CreateMirrorPod(ctx, nil), mirror.ErrNotStaticPod)
	_, err := f.DeleteMirrorPod(ctx, "web", nil)
	assert.ErrorIs(t, err, mirror.ErrInvalidFullName)

	assert.Equal(t, []*v1.Pod{regular, nil}, f.Creates(), "refused calls are recorded too")
	assert.Len(t, f.Deletes(), 1)
	assert.Empty(t, f.MirrorPodNames())
}

func TestFakeClientInjectedErrors(t *testing.T) {
	ctx := context.Background()
	f := mirrortest.NewFakeClient()
	boom := errors.New("boom")
	f.AddMirrorPod(staticPod("etcd", "h1"))

	f.SetCreateError(boom)
	f.SetDeleteError(boom)
	assert.ErrorIs(t, f.CreateMirrorPod(ctx, staticPod("kas", "h1")), boom)
	deleted, err := f.DeleteMirrorPod(ctx, "etcd_ns", nil)
	assert.ErrorIs(t, err, boom)
	assert.False(t, deleted)
	assert.Equal(t, []string{"etcd_ns"}, f.MirrorPodNames(), "a failed call changes nothing")

	f.SetCreateError(nil)
	f.SetDeleteError(nil)
	require.NoError(t, f.CreateMirrorPod(ctx, staticPod("kas", "h1")))
	deleted, err = f.DeleteMirrorPod(ctx, "etcd_ns", nil)
	require.NoError(t, err)
	assert.True(t, deleted)
	assert.Equal(t, []string{"kas_ns"}, f.MirrorPodNames())
}

func TestFakeClientReturnsCopies(t *testing.T) {
	ctx := context.Background()
	f := mirrortest.NewFakeClient()
	uid := types.UID("u1")
	pod := staticPod("etcd", "h1")
	require.NoError(t, f.CreateMirrorPod(ctx, pod))
	_, err := f.DeleteMirrorPod(ctx, "etcd_ns", &uid)
	require.NoError(t, err)

	pod.Annotations["changed"] = "after the call"
	uid = "changed"
	f.Creates()[0].Name = "mutated"
	*f.Deletes()[0].UID = "mutated"

	assert.Equal(t, "etcd", f.Creates()[0].Name)
	assert.NotContains(t, f.Creates()[0].Annotations, "changed")
	assert.Equal(t, types.UID("u1"), *f.Deletes()[0].UID)
}

func TestFakeClientIsSafeForConcurrentUse(t *testing.T) {
	ctx := context.Background()
	f := mirrortest.NewFakeClient()
	const workers, rounds = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				pod := staticPod(fmt.Sprintf("p%d", (w+r)%5), "h")
				assert.NoError(t, f.CreateMirrorPod(ctx, pod))
				_, err := f.DeleteMirrorPod(ctx, mirror.PodFullName(pod), nil)
				assert.NoError(t, err)
				f.MirrorPodNames()
				f.Creates()
				f.Deletes()
			}
		})
	}
	wg.Wait()
	assert.Len(t, f.Creates(), workers*rounds)
	assert.Len(t, f.Deletes(), workers*rounds)
}

func TestFakePodAPIBehavesLikeAnAPIServer(t *testing.T) {
	ctx := context.Background()
	api := mirrortest.NewFakePodAPI()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}

	created, err := api.Create(ctx, "ns", pod, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, created.UID)
	assert.NotEmpty(t, created.ResourceVersion)
	assert.Empty(t, pod.UID, "the given pod is not modified")

	_, err = api.Create(ctx, "ns", pod, metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err), "%v", err)

	got, err := api.Get(ctx, "ns", "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, created, got)
	got.Labels = map[string]string{"mutated": "yes"}
	again, _ := api.Get(ctx, "ns", "web", metav1.GetOptions{})
	assert.Nil(t, again.Labels, "returned pods are copies")

	missing, err := api.Get(ctx, "ns", "nope", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.NotNil(t, missing, "like client-go, an empty object comes with the error")

	err = api.Delete(ctx, "ns", "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("other"))}})
	assert.True(t, apierrors.IsConflict(err), "%v", err)
	err = api.Delete(ctx, "ns", "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To("0")}})
	assert.True(t, apierrors.IsConflict(err), "%v", err)
	require.NoError(t, api.Delete(ctx, "ns", "web", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}}))
	assert.True(t, apierrors.IsNotFound(api.Delete(ctx, "ns", "web", metav1.DeleteOptions{})))
	assert.Empty(t, api.Pods())
}

func TestFakePodAPIRejectsBadCreates(t *testing.T) {
	withRV := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "3"}}
	tests := []struct {
		name      string
		namespace string
		pod       *v1.Pod
	}{
		{"nil pod", "ns", nil},
		{"no name", "ns", &v1.Pod{}},
		{"namespace mismatch", "other", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}},
		{"resourceVersion set", "ns", withRV},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := mirrortest.NewFakePodAPI()
			_, err := api.Create(context.Background(), tc.namespace, tc.pod, metav1.CreateOptions{})
			assert.True(t, apierrors.IsBadRequest(err), "%v", err)
			assert.Empty(t, api.Pods())
		})
	}
}

func TestFakePodAPISetupAndInjection(t *testing.T) {
	ctx := context.Background()
	api := mirrortest.NewFakePodAPI(
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "kept"}},
		nil,
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}},
	)
	pods := api.Pods()
	require.Len(t, pods, 2)
	assert.Equal(t, []string{"a", "b"}, []string{pods[0].Name, pods[1].Name}, "sorted")
	assert.NotEmpty(t, pods[0].UID, "a UID is generated when missing")
	assert.Equal(t, types.UID("kept"), pods[1].UID)
	assert.True(t, api.Remove("ns", "b"))
	assert.False(t, api.Remove("ns", "b"))
	api.Put(pods[1])
	assert.Empty(t, api.Calls(), "setup is not recorded")

	boom := apierrors.NewInternalError(errors.New("boom"))
	api.InjectError(mirrortest.VerbDelete, boom)
	assert.ErrorIs(t, api.Delete(ctx, "ns", "a", metav1.DeleteOptions{}), boom)
	_, ok := api.Pod("ns", "a")
	assert.True(t, ok, "an injected error changes nothing")
	api.InjectError(mirrortest.VerbDelete, nil)
	require.NoError(t, api.Delete(ctx, "ns", "a", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}))

	var seen []mirrortest.Verb
	api.SetReactor(func(c mirrortest.Call) error {
		seen = append(seen, c.Verb)
		if c.Verb == mirrortest.VerbGet {
			return apierrors.NewTimeoutError("slow", 1)
		}
		return nil
	})
	_, err := api.Get(ctx, "ns", "b", metav1.GetOptions{})
	assert.True(t, apierrors.IsTimeout(err), "%v", err)
	api.SetReactor(nil)
	_, err = api.Get(ctx, "ns", "b", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []mirrortest.Verb{mirrortest.VerbGet}, seen)

	calls := api.Calls()
	require.Len(t, calls, 4)
	assert.Equal(t, mirrortest.Call{Verb: mirrortest.VerbDelete, Namespace: "ns", Name: "a",
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}}, calls[1])
}

func TestFakePodAPIIsSafeForConcurrentUse(t *testing.T) {
	ctx := context.Background()
	api := mirrortest.NewFakePodAPI()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for r := range 50 {
				name := fmt.Sprintf("p%d", (w+r)%6)
				_, _ = api.Create(ctx, "ns", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				_, _ = api.Get(ctx, "ns", name, metav1.GetOptions{})
				_ = api.Delete(ctx, "ns", name, metav1.DeleteOptions{})
				api.Pods()
				api.Calls()
			}
		})
	}
	wg.Wait()
	assert.Len(t, api.Calls(), 8*50*3)
}
