package objectcache_test

import (
	"context"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/podkit/podkit/examples/kube/objectcache"
	"github.com/podkit/podkit/lifecycle/podenv"
	"github.com/podkit/podkit/lifecycle/volume"
)

// TestCacheOverTheNodeAuthorizer runs a Cache with a node's own
// credentials against a real API server: it reads exactly the objects the
// node's pods reference, follows their changes, and stops watching what
// no pod references any more; the node may not list them all.
func TestCacheOverTheNodeAuthorizer(t *testing.T) {
	s := startServer(t, "node-a", "node-b")
	ctx := ctxFor(t)
	const ns = "team"
	_, err := s.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = s.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, sec := range []*v1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Data: map[string][]byte{"password": []byte("one")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pull"}, Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte("{}")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Immutable: ptr.To(true), Data: map[string][]byte{"k": []byte("v")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}, Data: map[string][]byte{"k": []byte("not yours")}},
	} {
		_, err := s.admin.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = s.admin.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	pod, err := s.admin.CoreV1().Pods(ns).Create(ctx, testPod(ns, "web", "node-a", func(spec *v1.PodSpec) {
		spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "pull"}}
		spec.Containers[0].Env = []v1.EnvVar{secretEnv("db", "password", false), secretEnv("later", "k", true)}
		spec.Volumes = []v1.Volume{
			{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}}},
			// The Node authorizer lets a node ask for tokens only for the
			// audiences its pods' projections name.
			{Name: "vault-token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Audience: "vault", Path: "token"}}}}}},
		}
	}), metav1.CreateOptions{})
	require.NoError(t, err)
	frozenPod, err := s.admin.CoreV1().Pods(ns).Create(ctx, testPod(ns, "batch", "node-a", func(spec *v1.PodSpec) {
		spec.Containers[0].EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "frozen"}}}}
	}), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = s.admin.CoreV1().Pods(ns).Create(ctx, testPod(ns, "other", "node-b", func(spec *v1.PodSpec) {
		spec.Containers[0].Env = []v1.EnvVar{secretEnv("elsewhere", "k", false)}
	}), metav1.CreateOptions{})
	require.NoError(t, err)

	node := s.node(t, "node-a")
	_, err = node.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "a node may not list secrets: %v", err)
	eventually(t, "the node may read the secret its pod references", func(ctx context.Context) (bool, error) {
		_, err := node.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{})
		return err == nil, nil
	})
	_, err = node.CoreV1().Secrets(ns).Get(ctx, "elsewhere", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "nor read another node's pod's secret: %v", err)

	requests := newSyncs()
	c, err := objectcache.New(node, objectcache.Options{RequestSync: requests.request, SyncTimeout: 10 * time.Second})
	require.NoError(t, err)
	c.RegisterPod(pod) // before Run: its watches start with Run
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()

	sec, err := c.GetSecret(ctx, ns, "db")
	require.NoError(t, err)
	require.Equal(t, "one", string(sec.Data["password"]))
	cm, err := c.GetConfigMap(ctx, ns, "settings")
	require.NoError(t, err)
	require.Equal(t, "fast", cm.Data["mode"])
	pull, err := c.GetSecret(ctx, ns, "pull")
	require.NoError(t, err, "image pull secrets are referenced too")
	require.Equal(t, v1.SecretTypeDockerConfigJson, pull.Type)
	_, err = c.GetSecret(ctx, ns, "later")
	require.True(t, apierrors.IsNotFound(err), "a referenced secret that does not exist: %v", err)
	require.Equal(t, `secret "later" not found`, err.Error(), "the kubelet's message")
	_, err = c.GetSecret(ctx, ns, "elsewhere")
	require.EqualError(t, err, "objectcache: secret team/elsewhere is referenced by no registered pod")
	require.Equal(t, []string{"configmap team/settings", "secret team/db", "secret team/later", "secret team/pull"}, c.Watching())

	// Changes reach the cache, and each asks for a sync of the pod.
	_, err = s.admin.CoreV1().Secrets(ns).Update(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Data: map[string][]byte{"password": []byte("two")}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, pod.UID, requests.next(t))
	sec, err = c.GetSecret(ctx, ns, "db")
	require.NoError(t, err)
	require.Equal(t, "two", string(sec.Data["password"]))

	_, err = s.admin.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string][]byte{"k": []byte("here")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, pod.UID, requests.next(t), "a secret created at last: the waiting container can start")
	sec, err = c.GetSecret(ctx, ns, "later")
	require.NoError(t, err)
	require.Equal(t, "here", string(sec.Data["k"]))

	require.NoError(t, s.admin.CoreV1().ConfigMaps(ns).Delete(ctx, "settings", metav1.DeleteOptions{}))
	require.Equal(t, pod.UID, requests.next(t))
	_, err = c.GetConfigMap(ctx, ns, "settings")
	require.True(t, apierrors.IsNotFound(err), "%v", err)

	// An immutable object is read once; its watch stops.
	c.RegisterPod(frozenPod)
	frozen, err := c.GetSecret(ctx, ns, "frozen")
	require.NoError(t, err)
	require.Equal(t, "v", string(frozen.Data["k"]))
	require.NotContains(t, c.Watching(), "secret team/frozen")

	// A pod that drops a reference stops its watch; the last pod gone, all stop.
	changed := pod.DeepCopy()
	changed.Spec.ImagePullSecrets = nil
	c.RegisterPod(changed)
	require.Equal(t, []string{"configmap team/settings", "secret team/db", "secret team/later"}, c.Watching())
	c.UnregisterPod(pod.UID)
	c.UnregisterPod(frozenPod.UID)
	require.Empty(t, c.Watching())
	eventually(t, "every watch's goroutine has returned", func(context.Context) (bool, error) {
		return watchGoroutines() == 0, nil
	})
	_, err = c.GetSecret(ctx, ns, "db")
	require.EqualError(t, err, "objectcache: secret team/db is referenced by no registered pod")

	// The node's TokenRequester asks for a token bound to its pod.
	tr := objectcache.NewTokenRequester(node)
	seconds := int64(600)
	resp, err := tr.RequestToken(ctx, ns, "robot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{"vault"}, ExpirationSeconds: &seconds,
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}})
	require.NoError(t, err)
	require.NotEmpty(t, resp.Status.Token)
	require.WithinDuration(t, time.Now().Add(10*time.Minute), resp.Status.ExpirationTimestamp.Time, time.Minute)
	_, err = tr.RequestToken(ctx, ns, "robot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "other", UID: types.UID("x")},
	}})
	require.True(t, apierrors.IsForbidden(err), "no token bound to another node's pod: %v", err)
}

func TestCacheBadInputAndTimeouts(t *testing.T) {
	_, err := objectcache.New(nil, objectcache.Options{})
	require.EqualError(t, err, "objectcache: New needs a client")
	_, err = objectcache.New(fake.NewClientset(), objectcache.Options{SyncTimeout: -1})
	require.EqualError(t, err, "objectcache: Options.SyncTimeout is -1ns; want 0 (the default, 5s) or more")

	synctest.Test(t, func(t *testing.T) {
		c, err := objectcache.New(fake.NewClientset(), objectcache.Options{})
		require.NoError(t, err)
		c.RegisterPod(nil)
		c.RegisterPod(&v1.Pod{})
		require.Empty(t, c.Watching(), "a nil pod or a pod without a UID is ignored")
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}, Spec: v1.PodSpec{
			Volumes: []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}}}}}
		c.RegisterPod(p)
		// Not running: the watch never answers; Get gives up after
		// SyncTimeout (the bubble's time).
		_, err = c.GetSecret(context.Background(), "ns", "s")
		require.EqualError(t, err, "objectcache: failed to sync secret cache: no answer from the API server within 5s")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = c.GetSecret(ctx, "ns", "s")
		require.ErrorIs(t, err, context.Canceled)

		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(runCtx) }()
		synctest.Wait()
		require.EqualError(t, c.Run(context.Background()), "objectcache: Run called twice")
		stop()
		require.NoError(t, <-done)
		_, err = c.GetSecret(context.Background(), "ns", "s")
		require.EqualError(t, err, "objectcache: secret ns/s: the cache is stopped")
	})
}

func TestRequestSyncPanicIsSurvived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Data: map[string]string{"k": "1"}})
		var calls atomic.Int32
		c, err := objectcache.New(client, objectcache.Options{RequestSync: func(types.UID) {
			calls.Add(1)
			panic("sync bug")
		}})
		require.NoError(t, err)
		stop := runWithPod(t, c, false)
		cm, err := c.GetConfigMap(context.Background(), "ns", "c")
		require.NoError(t, err)
		require.Equal(t, "1", cm.Data["k"])
		_, err = client.CoreV1().ConfigMaps("ns").Update(context.Background(), &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Data: map[string]string{"k": "2"}}, metav1.UpdateOptions{})
		require.NoError(t, err)
		synctest.Wait()
		cm, err = c.GetConfigMap(context.Background(), "ns", "c")
		require.NoError(t, err, "the watch survived the panic")
		require.Equal(t, "2", cm.Data["k"])
		require.Equal(t, int32(1), calls.Load(), "RequestSync was called, and panicked")
		stop()
	})
}

// watchGoroutines counts the goroutines running a watch of a Cache.
func watchGoroutines() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "objectcache.(*Cache).startLocked.func")
}

var (
	_ podenv.Objects        = (*objectcache.Cache)(nil)
	_ volume.TokenRequester = (*objectcache.TokenRequester)(nil)
)
