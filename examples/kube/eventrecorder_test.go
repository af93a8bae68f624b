package kube_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/podkit/podkit/examples/kube/events"
)

// hungEventsGetter hands out events APIs that never answer.
type hungEventsGetter struct{ writes *atomic.Int64 }

func (g hungEventsGetter) Events(string) corev1client.EventInterface {
	return hungEvents{writes: g.writes}
}

// runRecorder runs r until the returned stop is called; stop waits for Run
// to return.
func runRecorder(t *testing.T, r *events.Recorder) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(waitTimeout):
			t.Fatal("EventRecorder.Run did not return")
		}
	}
}

// TestEventRecorderNeverBlocks: with an events API that never answers,
// recording thousands of events returns at once (they are dropped past the
// queue), and Run still returns when told to.
func TestEventRecorderNeverBlocks(t *testing.T) {
	var writes atomic.Int64
	r, err := events.New(hungEventsGetter{&writes}, "node-a", events.Options{})
	require.NoError(t, err)
	stop := runRecorder(t, r)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"}}

	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		for i := range 5000 {
			r.Eventf(events.ContainerRef(pod, "c"), v1.EventTypeNormal, "Test", "event %d", i)
		}
	}()
	select {
	case <-recorded:
	case <-time.After(waitTimeout):
		t.Fatal("recording events blocked on a sink that does not answer")
	}
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return writes.Load() > 0, nil
	}), "the recorder tried to send")
	stop()
	// The recorder waited on the hung write rather than working through the
	// queue (one more write may begin as Run is told to stop).
	assert.LessOrEqual(t, writes.Load(), int64(2))
	r.Eventf(pod, v1.EventTypeNormal, "Late", "after Run returned") // dropped, not blocked
	r.Close()
}

// TestEventRecorderAggregates: the same event recorded again is one event
// in the API server, with a count.
func TestEventRecorderAggregates(t *testing.T) {
	cs := fake.NewClientset()
	r, err := events.New(cs.CoreV1(), "node-a", events.Options{})
	require.NoError(t, err)
	stop := runRecorder(t, r)
	defer stop()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec:       v1.PodSpec{InitContainers: []v1.Container{{Name: "i"}}, Containers: []v1.Container{{Name: "c"}}},
	}
	assert.Equal(t, "spec.initContainers{i}", events.ContainerRef(pod, "i").FieldPath)
	assert.Equal(t, "implicitly required container x", events.ContainerRef(pod, "x").FieldPath, "a name the spec does not hold")
	for range 5 {
		r.Eventf(events.ContainerRef(pod, "c"), v1.EventTypeWarning, events.ReasonBackOff, "%s", events.BackOffMessage(pod, "c"))
	}
	var events []v1.Event
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		events = list.Items
		return len(events) == 1 && events[0].Count == 5, nil
	}), "events: %v", events)
	ev := events[0]
	assert.Equal(t, "Back-off restarting failed container c in pod p_default(uid-p)", ev.Message)
	assert.Equal(t, "spec.containers{c}", ev.InvolvedObject.FieldPath)
	assert.Equal(t, v1.EventSource{Component: "kubelet", Host: "node-a"}, ev.Source)
}
