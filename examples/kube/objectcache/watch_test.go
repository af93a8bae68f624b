package objectcache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/podkit/podkit/examples/kube/objectcache"
)

// TestWatchStartsOverWhenItsVersionIsGone: a watch told its
// resourceVersion is gone (410 Expired) lists its object again, and
// follows it from there.
func TestWatchStartsOverWhenItsVersionIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Data: map[string]string{"k": "1"}})
		var lists, watches atomic.Int32
		client.PrependReactor("list", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
			lists.Add(1)
			return false, nil, nil
		})
		client.PrependWatchReactor("configmaps", func(clienttesting.Action) (bool, watch.Interface, error) {
			if watches.Add(1) > 1 {
				return false, nil, nil // the fake's own watch
			}
			expired := apierrors.NewResourceExpired("too old resource version")
			w := watch.NewFakeWithChanSize(1, false)
			w.Error(&expired.ErrStatus)
			return true, w, nil
		})
		c, err := objectcache.New(client, objectcache.Options{})
		require.NoError(t, err)
		stop := runWithPod(t, c, false)
		cm, err := c.GetConfigMap(context.Background(), "ns", "c")
		require.NoError(t, err)
		require.Equal(t, "1", cm.Data["k"])
		synctest.Wait()
		require.Equal(t, int32(2), lists.Load(), "listed again after the 410")
		require.Equal(t, int32(2), watches.Load(), "watched again after the list")
		_, err = client.CoreV1().ConfigMaps("ns").Update(context.Background(), &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Data: map[string]string{"k": "2"}}, metav1.UpdateOptions{})
		require.NoError(t, err)
		synctest.Wait()
		cm, err = c.GetConfigMap(context.Background(), "ns", "c")
		require.NoError(t, err)
		require.Equal(t, "2", cm.Data["k"], "the second watch is followed")
		stop()
	})
}

// TestWatchBacksOffAfterAFailure: a failed watch is retried after a
// backoff, not at once.
func TestWatchBacksOffAfterAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}})
		var watches atomic.Int32
		client.PrependWatchReactor("secrets", func(clienttesting.Action) (bool, watch.Interface, error) {
			if watches.Add(1) > 1 {
				return false, nil, nil
			}
			return true, nil, apierrors.NewServiceUnavailable("try later")
		})
		c, err := objectcache.New(client, objectcache.Options{})
		require.NoError(t, err)
		stop := runWithPod(t, c, true)
		_, err = c.GetSecret(context.Background(), "ns", "s")
		require.NoError(t, err, "the list answered")
		synctest.Wait()
		require.Equal(t, int32(1), watches.Load(), "no retry before the backoff")
		// The bubble's clock: the first backoff is 0.8 s and as much
		// jitter at most.
		time.Sleep(1700 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, int32(2), watches.Load(), "retried after the backoff")
		stop()
	})
}

// runWithPod runs c with one pod registered that uses the config map ns/c
// (envFrom) or, with secret, the secret ns/s (a volume), and returns stop,
// which stops c and checks that Run returned nil.
func runWithPod(t *testing.T, c *objectcache.Cache, secret bool) (stop func()) {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	spec := v1.PodSpec{Containers: []v1.Container{{Name: "m", EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}}}}}
	if secret {
		spec = v1.PodSpec{Volumes: []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}}}}
	}
	c.RegisterPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}, Spec: spec})
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}

// watchListClient is a clientset that says it supports watch-list
// requests: the fake's own method saying it does not is hidden.
type watchListClient struct{ kubernetes.Interface }

// TestWatchListEndedEarlyStartsOver: a watch-list that ends before its
// bookmark closed its initial events delivered objects that never
// reached the store, so the next request is a watch-list again, not a
// watch resumed from those objects' version.
func TestWatchListEndedEarlyStartsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "7"}, Data: map[string]string{"k": "1"}}
		var watches atomic.Int32
		var initialAsked []bool
		client.PrependWatchReactor("configmaps", func(a clienttesting.Action) (bool, watch.Interface, error) {
			opts := a.(clienttesting.WatchActionImpl).ListOptions
			initialAsked = append(initialAsked, opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.ResourceVersion == "")
			w := watch.NewFakeWithChanSize(2, false)
			w.Add(cm.DeepCopy())
			if watches.Add(1) == 1 {
				w.Stop() // ends before its bookmark
				return true, w, nil
			}
			w.Action(watch.Bookmark, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
			return true, w, nil
		})
		c, err := objectcache.New(watchListClient{client}, objectcache.Options{})
		require.NoError(t, err)
		stop := runWithPod(t, c, false)
		got, err := c.GetConfigMap(context.Background(), "ns", "c")
		require.NoError(t, err)
		require.Equal(t, "1", got.Data["k"])
		require.Equal(t, []bool{true, true}, initialAsked, "both requests were watch-lists from the start")
		stop()
	})
}
