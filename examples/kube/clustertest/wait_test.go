package clustertest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podkit/podkit/examples/kube/clustertest"
)

// fakeCluster is a fake clientset whose pod watches announce themselves on
// watching once the fake delivers their events, so that a test changes
// the pod only once WaitFor watches it. A watch of its own can be given
// for the next Watch call.
type fakeCluster struct {
	*fake.Clientset
	watching chan struct{}
}

func newFakeCluster(objs ...runtime.Object) *fakeCluster {
	f := &fakeCluster{Clientset: fake.NewClientset(objs...), watching: make(chan struct{}, 10)}
	f.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := f.Tracker().Watch(action.GetResource(), action.GetNamespace())
		f.watching <- struct{}{}
		return true, w, err
	})
	return f
}

func pod(name string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Status: v1.PodStatus{Phase: phase}}
}

// waitResult is what a WaitFor on a goroutine returned.
type waitResult[T any] struct {
	obj T
	err error
}

func waitInBackground[T runtime.Object](client clustertest.Client[T], name string, cond clustertest.Condition[T]) chan waitResult[T] {
	done := make(chan waitResult[T], 1)
	go func() {
		obj, err := clustertest.WaitFor(context.Background(), client, name, cond, time.Minute)
		done <- waitResult[T]{obj, err}
	}()
	return done
}

// TestWaitForSeesTheChange: WaitFor returns the object as the change that
// met the condition made it, on a pod that is not there yet at first, and
// on one that is.
func TestWaitForSeesTheChange(t *testing.T) {
	f := newFakeCluster(pod("pending", v1.PodPending))
	pods := f.CoreV1().Pods("default")
	ctx := context.Background()

	done := waitInBackground(pods, "pending", clustertest.PodRunning())
	<-f.watching
	_, err := pods.UpdateStatus(ctx, pod("pending", v1.PodRunning), metav1.UpdateOptions{})
	require.NoError(t, err)
	got := <-done
	require.NoError(t, got.err)
	assert.Equal(t, v1.PodRunning, got.obj.Status.Phase)

	done = waitInBackground(pods, "later", clustertest.PodRunning())
	<-f.watching
	_, err = pods.Create(ctx, pod("other", v1.PodRunning), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pods.Create(ctx, pod("later", v1.PodRunning), metav1.CreateOptions{})
	require.NoError(t, err)
	got = <-done
	require.NoError(t, got.err)
	assert.Equal(t, "later", got.obj.Name, "another pod's event is not the one waited for")
}

// TestWaitForNamesWhatItSawLast: a wait that times out says what it waited
// for and the object's state as last seen.
func TestWaitForNamesWhatItSawLast(t *testing.T) {
	f := newFakeCluster(pod("stuck", v1.PodPending))
	_, err := clustertest.WaitFor(context.Background(), f.CoreV1().Pods("default"), "stuck", clustertest.PodRunning(), 50*time.Millisecond)
	require.Error(t, err)
	assert.Equal(t, "clustertest: Pod default/stuck not Running after 50ms; last seen: stuck phase=Pending node= conditions=[] containers=[]", err.Error())

	_, err = clustertest.WaitFor(context.Background(), f.BatchV1().Jobs("default"), "missing", clustertest.JobComplete(), 50*time.Millisecond)
	require.Error(t, err)
	assert.Equal(t, `clustertest: Job "missing" not Complete after 50ms; last seen: <none: it does not exist>`, err.Error())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = clustertest.WaitFor(ctx, f.CoreV1().Pods("default"), "stuck", clustertest.PodRunning(), time.Minute)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not Running when the wait was canceled")
}

// TestWaitForEndsWhenTheConditionCannotHold: a pod that failed will never
// run; a failed Job will never complete: WaitFor says so at once.
func TestWaitForEndsWhenTheConditionCannotHold(t *testing.T) {
	failed := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "default"},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: v1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
		}},
	}
	f := newFakeCluster(pod("failed", v1.PodFailed), failed)
	start := time.Now()
	_, err := clustertest.WaitFor(context.Background(), f.CoreV1().Pods("default"), "failed", clustertest.PodRunning(), time.Minute)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Pod default/failed will not be Running: the pod ended Failed")
	_, err = clustertest.WaitFor(context.Background(), f.BatchV1().Jobs("default"), "j", clustertest.JobComplete(), time.Minute)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Job default/j will not be Complete: the Job failed (BackoffLimitExceeded: Job has reached the specified backoff limit)")
	assert.Less(t, time.Since(start), 30*time.Second, "no wait for the timeout")
}

// TestWaitForGone: Gone is met by a deletion the watch sees.
func TestWaitForGone(t *testing.T) {
	f := newFakeCluster(pod("doomed", v1.PodRunning))
	pods := f.CoreV1().Pods("default")
	done := waitInBackground(pods, "doomed", clustertest.Gone[*v1.Pod]())
	<-f.watching
	require.NoError(t, pods.Delete(context.Background(), "doomed", metav1.DeleteOptions{}))
	got := <-done
	require.NoError(t, got.err)
	assert.Nil(t, got.obj)
}

// TestWaitForReadsAgainWhenTheWatchEnds: a watch that ends (the API server
// closes watches after a while) is followed by a new read, which sees the
// change made meanwhile.
func TestWaitForReadsAgainWhenTheWatchEnds(t *testing.T) {
	f := newFakeCluster(pod("p", v1.PodPending))
	short := watch.NewFake()
	var calls atomic.Int32
	f.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		if calls.Add(1) > 1 {
			return false, nil, nil // the tracker's watch, as before
		}
		f.watching <- struct{}{}
		return true, short, nil
	})
	pods := f.CoreV1().Pods("default")
	done := waitInBackground(pods, "p", clustertest.PodRunning())
	<-f.watching // the short watch
	_, err := pods.UpdateStatus(context.Background(), pod("p", v1.PodRunning), metav1.UpdateOptions{})
	require.NoError(t, err)
	short.Stop()
	got := <-done
	require.NoError(t, got.err)
	assert.Equal(t, v1.PodRunning, got.obj.Status.Phase)
}
