package podworkertest

import (
	"context"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podkit/podkit/mirror"
	"github.com/podkit/podkit/podworker"
)

// Start runs w.Run in a new goroutine and returns a function that stops it:
// stop cancels Run's context, waits for Run to return (and so for every hook
// it started), and reports an error from Run to tb. stop is also registered
// with tb.Cleanup; calling it more than once is fine.
func Start[T any](tb testing.TB, w *podworker.PodWorkers[T]) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("podworkertest: Run returned %v", err)
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

// NewPod returns a pod with the given UID, namespace and name, and a
// termination grace period of 30 seconds in its spec (as the API server
// defaults it). The pod is the caller's to change before handing it to the
// engine.
func NewPod(uid types.UID, namespace, name string) *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: uid, Namespace: namespace, Name: name},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &grace},
	}
}

// NewStaticPod is NewPod for a static pod: its kubernetes.io/config.source
// annotation says it came from a manifest file, so the engine lets only one
// static pod of a full name run at a time.
func NewStaticPod(uid types.UID, namespace, name string) *v1.Pod {
	pod := NewPod(uid, namespace, name)
	pod.Annotations = map[string]string{mirror.ConfigSourceAnnotationKey: mirror.FileSource}
	return pod
}
